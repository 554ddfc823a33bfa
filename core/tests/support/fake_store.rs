// Included (`include!`) by the core tests that drive writes: one user's
// record store in memory, with a fixed clock, that answers a write's needs
// and applies its commits as the real store would.

mod fake_store {
    use std::collections::HashMap;

    use folio_core::auth::access::Access;
    use folio_core::model::{BlobHash, Entity, Link, ReceivedRecord, Record, RecordDate, RecordId};
    use folio_core::schema::FoundLink;
    use folio_core::write::{
        BlobFacts, Commit, Need, NewVersion, RecordKey, Step, Supplied, Write, WriteContext,
        WriteError, WriteRequest,
    };

    pub struct FakeStore {
        pub user: Entity,
        /// The clock: it stands still unless a test moves it.
        pub now: RecordDate,
        /// Every version of every record, oldest first.
        versions: HashMap<RecordKey, Vec<NewVersion>>,
        known_entities: Vec<Entity>,
        blobs: HashMap<BlobHash, BlobFacts>,
        last_received_at: Option<RecordDate>,
        ids_drawn: u128,
        /// How many rounds of fetching the last write took.
        pub rounds: usize,
    }

    impl FakeStore {
        pub fn new(user: &str, now: &str) -> Self {
            Self {
                user: user.parse().unwrap(),
                now: now.parse().unwrap(),
                versions: HashMap::new(),
                known_entities: Vec::new(),
                blobs: HashMap::new(),
                last_received_at: None,
                ids_drawn: 0,
                rounds: 0,
            }
        }

        pub fn owner(&self) -> Access {
            Access::Owner {
                entity: self.user.clone(),
            }
        }

        /// Another local user, or an entity whose Entity record is stored here.
        pub fn know(&mut self, entity: &str) {
            self.known_entities.push(entity.parse().unwrap());
        }

        /// A blob of the store, `uploaded` within the hour or not.
        pub fn put_blob(&mut self, hash: &str, size: u64, uploaded: bool) {
            let facts = BlobFacts { size, uploaded };
            self.blobs.insert(hash.parse().unwrap(), facts);
        }

        /// Stores a version that did not come through a write (another
        /// entity's record, a type published elsewhere), without links.
        pub fn insert(&mut self, record: Record) {
            // A record from elsewhere may carry no receipt dates: the fake
            // keeps it as received at the epoch.
            let epoch = RecordDate::from_unix_ticks(0).unwrap();
            let record = ReceivedRecord::new(record.clone())
                .unwrap_or_else(|| ReceivedRecord::stamp(record, epoch));
            let version = NewVersion {
                record,
                links: Vec::new(),
                search_text: String::new(),
                replaces: None,
                former_audience: Vec::new(),
            };
            let key = RecordKey::of(&version.record);
            self.versions.entry(key).or_default().push(version);
        }

        pub fn latest(&self, key: &RecordKey) -> &Record {
            &self.versions[key].last().expect("a stored record").record
        }

        pub fn version_count(&self, key: &RecordKey) -> usize {
            self.versions.get(key).map_or(0, Vec::len)
        }

        /// Runs a write to its end, answering every need, and stores what it commits.
        pub fn run(&mut self, request: WriteRequest, access: Access) -> Result<Commit, WriteError> {
            self.ids_drawn += 1;
            let context = WriteContext {
                user: self.user.clone(),
                access,
                now: self.now,
                received_at: self.now,
                last_received_at: self.last_received_at,
                fresh_id: format!("{:032x}", 0xf00d_0000_u128 + self.ids_drawn)
                    .parse()
                    .unwrap(),
            };
            let mut write = Write::new(request, context);
            self.rounds = 0;
            let result = loop {
                match write.step() {
                    Step::Fetch(needs) => {
                        self.rounds += 1;
                        write.supply(needs.iter().map(|need| self.answer(need)).collect());
                    }
                    Step::Done(result) => break result,
                }
            };
            if let Ok(commit) = &result {
                self.apply(commit);
            }
            result
        }

        pub fn answer(&self, need: &Need) -> Supplied {
            match need {
                Need::Latest(key) => {
                    Supplied::Record(self.latest_version(key).cloned().map(std::sync::Arc::new))
                }
                Need::Version { record, hash } => Supplied::Record(
                    self.versions
                        .get(record)
                        .and_then(|versions| {
                            versions.iter().find(|v| v.record.version.hash == *hash)
                        })
                        .map(|v| std::sync::Arc::new(v.record.record().clone())),
                ),
                Need::Entity(entity) => Supplied::Known(self.known_entities.contains(entity)),
                Need::Blob(hash) => Supplied::Blob(self.blobs.get(hash).copied()),
                Need::Dependants(target) => self.live_linking(|found| {
                    found.existential
                        && matches!(&found.link, Link::Record(link)
                            if link.entity == target.entity && link.record_id == target.record_id)
                }),
                Need::BlobLinkers(hash) => self.live_linking(
                    |found| matches!(&found.link, Link::Blob(blob) if blob.hash == *hash),
                ),
            }
        }

        /// The live records whose latest version has a link `linking` accepts.
        fn live_linking(&self, linking: impl Fn(&FoundLink) -> bool) -> Supplied {
            Supplied::Records(
                self.versions
                    .values()
                    .filter_map(|versions| versions.last())
                    .filter(|latest| {
                        !latest.record.is_tombstone() && latest.links.iter().any(&linking)
                    })
                    .map(|latest| latest.record.record().clone())
                    .collect(),
            )
        }

        fn latest_version(&self, key: &RecordKey) -> Option<&Record> {
            self.versions
                .get(key)
                .and_then(|versions| versions.last())
                .map(|version| version.record.record())
        }

        /// Stores a commit as the real store does: each version must replace
        /// the latest one, and `received_at` must grow strictly.
        fn apply(&mut self, commit: &Commit) {
            for version in commit.versions() {
                let key = RecordKey::of(&version.record);
                let latest = self.latest_version(&key).map(|r| r.version.hash);
                assert_eq!(latest, version.replaces, "{key} moved meanwhile");
                let received_at = version.record.version_received_at();
                assert!(self.last_received_at.is_none_or(|last| received_at > last));
                self.last_received_at = Some(received_at);
                self.versions.entry(key).or_default().push(version.clone());
            }
        }
    }

    /// A record id made of one repeated hex digit.
    pub fn id(digit: char) -> RecordId {
        digit.to_string().repeat(32).parse().unwrap()
    }
}
