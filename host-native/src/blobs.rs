//! Blob files, content-addressed by SHA-256 under the data directory:
//! `blobs/<first 2 hex>/<hash>`. An upload streams to a temporary file,
//! hashing as it goes, is fsynced, and renamed into place; a file is shared
//! by every store that uploaded the same bytes.

use std::path::PathBuf;

use folio_core::UploadFailure;
use folio_core::model::RecordDate;
use folio_core::service::blob::{Received, UploadMeter};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::{Mutex, MutexGuard};

/// Where a blob directory keeps the file of `hash` (64 hex characters):
/// `root/<first 2 hex>/<hash>`. The data directory's layout, which
/// `folio backup`, `export`, `import` and `user remove` read too.
pub fn file_path(root: &std::path::Path, hash: &str) -> PathBuf {
    root.join(&hash[..2]).join(hash)
}

/// The blob files.
pub struct BlobStore {
    root: PathBuf,
    /// Held while a file is put in place and its row written, and while an
    /// expired file is removed, so a collection never removes a file that
    /// an upload has just stored again.
    placing: Mutex<()>,
}

impl BlobStore {
    pub fn new(root: PathBuf) -> Self {
        BlobStore {
            root,
            placing: Mutex::new(()),
        }
    }

    /// The path of a blob's file (the hash is 64 hex characters, checked by the caller's type).
    pub fn path(&self, hash: &str) -> PathBuf {
        file_path(&self.root, hash)
    }

    pub async fn lock(&self) -> MutexGuard<'_, ()> {
        self.placing.lock().await
    }

    /// Streams a body into a temporary file through core's `meter`
    /// (its length rule and its hash); answers the temporary file's path
    /// with what the meter made of it.
    pub async fn receive(
        &self,
        body: axum::body::Body,
        mut meter: UploadMeter,
    ) -> Result<(PathBuf, Received), UploadFailure> {
        let tmp = self.tmp_path();
        let io = |error: std::io::Error| match error.kind() {
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                UploadFailure::StorageFull(format!("blob storage: {error}"))
            }
            _ => UploadFailure::Failed(format!("blob storage: {error}")),
        };
        let result = async {
            let mut file = tokio::fs::File::create(&tmp).await.map_err(io)?;
            let mut stream = body.into_data_stream();
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(|error| UploadFailure::Broken(error.to_string()))?;
                meter.feed(&chunk)?;
                file.write_all(&chunk).await.map_err(io)?;
            }
            let received = meter.finish()?;
            file.sync_all().await.map_err(io)?;
            Ok(received)
        }
        .await;
        match result {
            Ok(received) => Ok((tmp, received)),
            Err(error) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                Err(error)
            }
        }
    }

    /// A fresh temporary file's path, for bytes on their way into place.
    fn tmp_path(&self) -> PathBuf {
        self.root
            .join("tmp")
            .join(hex::encode(rand::random::<[u8; 16]>()))
    }

    /// Writes bytes read whole (a blob fetched from another server) to a
    /// temporary file, flushed, for [`BlobStore::place`].
    pub async fn write_tmp(&self, bytes: &[u8]) -> Result<PathBuf, std::io::Error> {
        let tmp = self.tmp_path();
        let written = async {
            let mut file = tokio::fs::File::create(&tmp).await?;
            file.write_all(bytes).await?;
            file.sync_all().await
        }
        .await;
        match written {
            Ok(()) => Ok(tmp),
            Err(error) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                Err(error)
            }
        }
    }

    /// Moves a received file into place (call with [`BlobStore::lock`] held).
    pub async fn place(&self, tmp: PathBuf, hash: &str) -> Result<(), std::io::Error> {
        let path = self.path(hash);
        let dir = path.parent().map(PathBuf::from).unwrap_or_default();
        tokio::fs::create_dir_all(&dir).await?;
        if tokio::fs::try_exists(&path).await? {
            tokio::fs::remove_file(&tmp).await?;
            return Ok(());
        }
        tokio::fs::rename(&tmp, &path).await?;
        // The rename itself must reach the disk before the row that names it.
        tokio::fs::File::open(&dir).await?.sync_all().await?;
        Ok(())
    }

    /// When a blob's file was stored: its modification time, or `None`
    /// when there is no such file.
    pub async fn stored_at(&self, hash: &str) -> Result<Option<RecordDate>, std::io::Error> {
        let modified = match tokio::fs::metadata(self.path(hash)).await {
            Ok(metadata) => metadata.modified()?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(crate::clock::date_of(modified)))
    }

    /// The hashes of every blob file kept (names that are not a hash, as
    /// a stray editor's backup would be, are left alone).
    pub async fn kept(&self) -> Result<Vec<String>, std::io::Error> {
        let mut hashes = Vec::new();
        let mut dirs = tokio::fs::read_dir(&self.root).await?;
        while let Some(dir) = dirs.next_entry().await? {
            let name = dir.file_name();
            let is_prefix = name.len() == 2 && name.to_str().is_some_and(is_lower_hex);
            if !is_prefix || !dir.file_type().await?.is_dir() {
                continue;
            }
            let mut files = tokio::fs::read_dir(dir.path()).await?;
            while let Some(file) = files.next_entry().await? {
                if let Some(hash) = file.file_name().to_str()
                    && hash.len() == 64
                    && is_lower_hex(hash)
                    && hash.starts_with(name.to_str().unwrap_or_default())
                {
                    hashes.push(hash.to_owned());
                }
            }
        }
        Ok(hashes)
    }

    /// Removes every unfinished upload older than `before` (all of them,
    /// with `None`: before the server serves, none is in flight). Answers
    /// how many went.
    pub async fn sweep_uploads(&self, before: Option<RecordDate>) -> Result<usize, std::io::Error> {
        let mut removed = 0;
        let mut files = tokio::fs::read_dir(self.root.join("tmp")).await?;
        while let Some(file) = files.next_entry().await? {
            let modified = crate::clock::date_of(file.metadata().await?.modified()?);
            if before.is_none_or(|before| modified < before) {
                tokio::fs::remove_file(file.path()).await?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Removes a blob's file (call with [`BlobStore::lock`] held).
    pub async fn remove(&self, hash: &str) -> Result<(), std::io::Error> {
        match tokio::fs::remove_file(self.path(hash)).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

fn is_lower_hex(text: &str) -> bool {
    text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
