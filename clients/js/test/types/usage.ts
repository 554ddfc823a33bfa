// Compiled by `npm run typecheck` (tsc --noEmit), never run: an app's use
// of the SDK, so the declarations in src/index.d.ts are checked against it.
import { AppKey, Folio, FolioError, filter, register, authorizationFrom, versionLink } from "folio-client";
import type { FolioRecord, VersionLink } from "folio-client";
import type { Message, MessageContent } from "./generated/message.js";

interface Note {
  title: string;
  tags?: string[];
}

export async function app(seed: string, noteType: VersionLink): Promise<void> {
  const key = await AppKey.fromSeed(seed);
  const folio = await Folio.connect({
    entity: "alice.example",
    app: { appId: "0".repeat(32), authorizationId: "1".repeat(32), key },
    clientId: "2".repeat(32),
  });
  const note: FolioRecord<Note> = await folio.records.create<Note>({ type: noteType, content: { title: "a" } });
  const again = await folio.records.update(note, { content: { title: "b", tags: ["x"] } });
  const title: string = again.content?.title ?? "";
  for await (const each of folio.records.list<Note>({ filter: filter.and(filter.type(noteType), filter.author("alice.example")) })) {
    console.log(each.content?.title, title);
  }
  const page = await folio.records.page<Note>({ pageSize: 10, includeLinks: ["entity"] });
  // Another entity's records, read through its server (`proxy_to`).
  for await (const each of folio.records.list<Note>({ proxyTo: "bob.example", filter: filter.type(noteType) })) {
    const theirs: FolioRecord<Note> = await folio.records.get<Note>(each.id, { entity: "bob.example", proxyTo: "bob.example" });
    console.log(theirs.source, theirs.content?.title);
  }
  console.log(page.records.length, await page.next());
  const live = folio.events.subscribe<Note>({ filter: filter.type(noteType) });
  for await (const record of live) {
    console.log(record.content?.title);
    live.close();
  }
  const file = await folio.blobs.upload(new Uint8Array([1, 2, 3]), { type: "image/png", name: "a.png" });
  const url: URL = await folio.blobs.bearerUrl(note, file);
  console.log(url.href, versionLink(note).version_hash);
  try {
    await folio.records.delete(note, { action: "local" });
  } catch (error) {
    if (error instanceof FolioError && error.code === "version_conflict") console.log(error.status);
  }
  const registered = await register({
    entity: "alice.example",
    key: await AppKey.generate(),
    name: "Notes",
    redirect: "https://notes.example/back{?authorization_id}",
    scope: { read: [noteType], write: [noteType] },
  });
  const authorizationId: string = authorizationFrom(registered.consentUrl);
  console.log(authorizationId);

  // Types from `folio schema typescript`.
  const message: Message = await folio.records.get<MessageContent>("3".repeat(32));
  const conversation: string | undefined = message.content?.conversation.record_id;
  console.log(conversation);
}
