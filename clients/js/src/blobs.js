// Blobs (spec §4.5, PROTOCOL.md §9): bytes uploaded on their own, then
// linked from a record, and downloaded through a record that links them.
import { FolioError } from "./errors.js";
import { bearerUrl } from "./signing.js";

/** The time a bearer URL lasts unless told otherwise: an hour. */
export const DEFAULT_BEARER_LIFETIME_MS = 3_600_000;

export class Blobs {
  constructor(folio) {
    this.folio = folio;
  }

  /**
   * Uploads `bytes` (a Uint8Array, ArrayBuffer or Blob) and answers the
   * blob link to put in a record: `{hash, type, name, size}`. The body's
   * SHA-256 is signed, so the server refuses bytes changed on the way.
   */
  async upload(bytes, { type = "application/octet-stream", name = "blob" } = {}) {
    const body = new Uint8Array(bytes instanceof Blob ? await bytes.arrayBuffer() : bytes);
    const answer = await this.folio.request("POST", this.folio.url("new_blob"), {
      body,
      headers: { "content-type": type },
    });
    return { hash: answer.hash, type, name, size: answer.size };
  }

  /** The download URL of blob link `file` through `record` (which links it). */
  url(record, file) {
    return this.folio.url("record_blob", {
      entity: record.author.entity,
      record_id: record.id,
      blob_hash: file.hash,
      file_name: file.name,
    });
  }

  /** The bytes of blob link `file` through `record`, signed. */
  async download(record, file) {
    const response = await this.folio.send("GET", this.url(record, file));
    if (!response.ok) throw await FolioError.from(response);
    return new Uint8Array(await response.arrayBuffer());
  }

  /**
   * A URL anyone holding it may GET until `expiresAt` (default: an hour
   * from now): for an `<img>` or a link to share.
   */
  async bearerUrl(record, file, { expiresAt = Date.now() + DEFAULT_BEARER_LIFETIME_MS } = {}) {
    const app = this.folio.app;
    if (!app) throw new TypeError("a bearer URL is signed by an app; this client has none");
    return bearerUrl({
      key: app.key,
      appId: app.appId,
      authorizationId: app.authorizationId,
      url: this.url(record, file),
      expiresAt,
      dialect: this.folio.dialect,
    });
  }
}
