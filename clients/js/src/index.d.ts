// Type declarations of folio-client.

/** The protocol's header and prefix names: the spec's (`svc`) or the original's (`baq`). */
export type Dialect = "svc" | "baq";

/** `{entity}`: a link to an entity. */
export interface EntityLink {
  entity: string;
}

/** `{entity, record_id}`: a link to a record. */
export interface RecordLink {
  entity: string;
  record_id: string;
}

/** `{entity, record_id, version_hash}`: a link to one version of a record. */
export interface VersionLink extends RecordLink {
  version_hash: string;
}

/** A blob link, as a record's content holds it. */
export interface BlobLink {
  hash: string;
  type: string;
  name: string;
  size: number;
}

/** A record as the server answers it; `C` is its content. */
export interface FolioRecord<C = Record<string, unknown>> {
  id: string;
  /**
   * Where the server got it: `self`, `resolution`, `notification`,
   * `notification_unknown`, `subscription`, or `proxy` (read through another
   * server with `proxy_to`, not stored). A `proxy` record was always served
   * by its author's own server: the server drops any record another server
   * serves under someone else's name (docs/federation.md §5).
   */
  source: string;
  author: { entity: string };
  created_at: string;
  received_at: string;
  type: VersionLink;
  permissions: Record<string, unknown>;
  version: {
    hash: string;
    parent_hash?: string;
    created_at: string;
    received_at: string;
    author: { entity: string };
  };
  content?: C;
  no_content?: { action: "delete" | "local" | "leave"; links?: unknown[] };
}

/** An app's Ed25519 key pair (WebCrypto) and its public key in standard base64. */
export declare class AppKey {
  readonly privateKey: CryptoKey;
  readonly publicKey: string;
  /** A new key; non-extractable unless `extractable` (to save it, in node). */
  static generate(options?: { extractable?: boolean }): Promise<AppKey>;
  /** The key of a 32-byte seed in base64, as `folio app add` prints it. */
  static fromSeed(seed: string): Promise<AppKey>;
  /** In a browser: the key kept in IndexedDB under `name`, made (not extractable) on first use. */
  static inBrowser(name?: string): Promise<AppKey>;
  /** In node: the key in the file at `path`, made there (mode 0600) on first use. */
  static inFile(path: string): Promise<AppKey>;
  /** The seed, standard base64 (extractable keys only). */
  seed(): Promise<string>;
  /** Writes the key to a new file (mode 0600; extractable keys only). */
  save(path: string): Promise<void>;
  /** The Ed25519 signature of `bytes`. */
  sign(bytes: Uint8Array): Promise<Uint8Array>;
}

/** An app as the SDK signs for it. */
export interface AppCredentials {
  appId: string;
  /** The App Authorization record's id; `null` while registering. */
  authorizationId: string | null;
  key: AppKey;
}

/** A refused request, or an answer that is not what the protocol says. */
export declare class FolioError extends Error {
  readonly status: number;
  /** The protocol's code (`record_not_found`, `version_conflict`, …), or the SDK's own (`hash_mismatch`, `access_denied`). */
  readonly code: string;
  readonly type: string | null;
  readonly title: string | null;
  readonly detail: string | null;
  readonly problem: Record<string, unknown> | null;
}

export interface ConnectOptions {
  /** An entity name (`alice.example`) or the URL it is served at. */
  entity: string;
  /** Without it, the client reads what is public only. */
  app?: AppCredentials | null;
  dialect?: Dialect;
  /** Sent (and signed) with every request: the app's own writes are not sent back on its event streams. */
  clientId?: string | null;
  /** Check every record received against its version hash (default true). */
  verify?: boolean;
  /**
   * Send and sign each body's SHA-256 (default: outside browsers; a
   * browser may not send that header, which the CORS answer does not list).
   */
  signBodies?: boolean;
  /** How many times a `429` or `503` is sent again after its `Retry-After` (at most 30 s); default 2. */
  retries?: number;
  /**
   * The fetch every request goes through. Left out, node sends the
   * requests whose answer is read whole through node:https (about half
   * fetch's time a round trip) and the rest through the global fetch.
   */
  fetch?: typeof fetch;
}

/** A user's store, as one app sees it. */
export declare class Folio {
  constructor(options: ConnectOptions & { endpoints: Record<string, string> });
  /** Finds `entity`'s store through its Entity record and connects to it. */
  static connect(options: ConnectOptions): Promise<Folio>;
  readonly entity: string;
  readonly endpoints: Record<string, string>;
  readonly records: Records;
  readonly events: Events;
  readonly blobs: Blobs;
  /** The URL of an endpoint, its template filled. */
  url(name: string, values?: Record<string, string>): URL;
  /** A signed request answering its JSON (or `null`); a refusal throws a FolioError. */
  request(method: string, url: URL | string, options?: RequestOptions): Promise<any>;
  /** A signed request answering the raw Response. */
  send(method: string, url: URL | string, options?: RequestOptions): Promise<Response>;
}

export interface RequestOptions {
  body?: unknown;
  headers?: Record<string, string>;
  /** Names of `headers` (lowercase) to sign besides the body digest and the client id. */
  sign?: string[];
  signed?: boolean;
  signal?: AbortSignal;
}

/** A filter condition, from the `filter` helpers. */
export interface Condition {
  readonly op: "and" | "or" | null;
}

export interface ListOptions {
  /** A condition, a filter in the protocol's grammar, or several (any matches). */
  filter?: Condition | string | Array<Condition | string>;
  /**
   * Words every record listed holds in its text: its strings and tags (a
   * Folio extension, docs/search.md). Without `sort`, the best matches
   * first, in one page; with one, every match in that order.
   */
  search?: string;
  /** E.g. `$['received_at']+asc`. */
  sort?: string;
  pageSize?: number;
  includeLinks?: string[];
  includeDeleted?: boolean;
  distinct?: string;
  sources?: string[];
  /**
   * An entity: list its own records that the user may read, asked of its
   * server through the user's (`source: "proxy"`, not stored).
   */
  proxyTo?: string;
}

export interface GetOptions {
  /** The record's author; the store's own entity by default. */
  entity?: string;
  includeLinks?: string[];
  /**
   * The record's author (`entity`): read it from the author's server
   * through the user's (`source: "proxy"`, not stored).
   */
  proxyTo?: string;
}

/** One page of a list. */
export declare class Page<C = Record<string, unknown>> {
  readonly records: FolioRecord<C>[];
  /** The records `includeLinks` asked for, by `entity+record_id`. */
  readonly linked: Map<string, FolioRecord>;
  readonly nextPage: string | null;
  linkedRecord(link: RecordLink): FolioRecord | null;
  /** The next page, or `null` after the last. */
  next(): Promise<Page<C> | null>;
}

export declare class Records {
  create<C>(body: { type: VersionLink | FolioRecord; content: C; permissions?: Record<string, unknown>; id?: string; created_at?: string }): Promise<FolioRecord<C>>;
  get<C = Record<string, unknown>>(id: string | RecordLink | FolioRecord, options?: GetOptions): Promise<FolioRecord<C>>;
  /** A new version; refused with `version_conflict` if another was written since `record` was read. */
  update<C>(record: FolioRecord<C>, changes: { content: C; permissions?: Record<string, unknown>; type?: VersionLink }): Promise<FolioRecord<C>>;
  delete(record: FolioRecord<any>, options?: { action?: "delete" | "local" | "leave" }): Promise<FolioRecord<never>>;
  versions<C = Record<string, unknown>>(id: string | RecordLink | FolioRecord, options?: { entity?: string }): Promise<FolioRecord<C>[]>;
  /** A record with the records `includeLinks` asks for (JSON paths of links, `entity`, `existential`). */
  getWithLinks<C = Record<string, unknown>>(id: string | RecordLink | FolioRecord, options?: GetOptions): Promise<{
    record: FolioRecord<C>;
    linked: Map<string, FolioRecord>;
    linkedRecord(link: RecordLink): FolioRecord | null;
  }>;
  page<C = Record<string, unknown>>(options?: ListOptions): Promise<Page<C>>;
  list<C = Record<string, unknown>>(options?: ListOptions): AsyncGenerator<FolioRecord<C>>;
  /** A version link to the built-in Type record named `name` (`type`, `app`, …). */
  builtinType(name: string): Promise<VersionLink>;
  /**
   * The user's type named `content.name`, brought to `content`: the same content again changes
   * nothing, changed content is a new version of that type, an unknown name a new type.
   */
  ensureType(content: { name: string; [field: string]: unknown }): Promise<VersionLink>;
}

/** A live subscription: an async iterable of records. */
export declare class Subscription<C = Record<string, unknown>> implements AsyncIterable<FolioRecord<C>> {
  /** Where it would resume (sent as `Last-Event-Id`). */
  readonly lastEventId: string | null;
  close(): void;
  [Symbol.asyncIterator](): AsyncIterator<FolioRecord<C>>;
}

export declare class Events {
  subscribe<C = Record<string, unknown>>(options?: {
    filter?: ListOptions["filter"];
    includeDeleted?: boolean;
    /** A RecordDate at most 20 s back. */
    min?: string;
    lastEventId?: string | null;
    onOpen?: () => void;
    onError?: (error: Error) => void;
  }): Subscription<C>;
}

export declare class Blobs {
  /** Uploads bytes and answers the blob link to put in a record. */
  upload(bytes: Uint8Array | ArrayBuffer | Blob, options?: { type?: string; name?: string }): Promise<BlobLink>;
  url(record: FolioRecord<any>, file: BlobLink): URL;
  download(record: FolioRecord<any>, file: BlobLink): Promise<Uint8Array>;
  /** A URL anyone holding it may GET until `expiresAt` (default an hour). */
  bearerUrl(record: FolioRecord<any>, file: BlobLink, options?: { expiresAt?: number | Date }): Promise<URL>;
}

export declare namespace filter {
  function path(at: string | string[]): string;
  const value: {
    entity(entity: string): { text: string };
    record(link: RecordLink): { text: string };
    version(link: VersionLink): { text: string };
    tag(tag: string): { text: string };
  };
  function at(where: string | string[], value: { text: string } | null): Condition;
  function any(value: { text: string }): Condition;
  function type(typeLink: RecordLink): Condition;
  function author(entity: string): Condition;
  function and(...conditions: Condition[]): Condition;
  function or(...conditions: Condition[]): Condition;
  function raw(text: string): Condition;
  function toFilter(condition: Condition | string): string;
}

export declare function recordLink(record: FolioRecord<any>): RecordLink;
export declare function versionLink(record: FolioRecord<any>): VersionLink;

/** Registers an app; send the user to `consentUrl`. */
export declare function register(options: {
  entity: string;
  key: AppKey;
  id?: string;
  name: string;
  description?: string;
  website?: string;
  /** An RFC 6570 template, e.g. `https://app.example/back{?authorization_id}`. */
  redirect: string;
  scope?: { read?: Array<RecordLink | FolioRecord<any>>; write?: Array<RecordLink | FolioRecord<any>>; subscribe?: Array<RecordLink | FolioRecord<any>> };
  dialect?: Dialect;
  fetch?: typeof fetch;
}): Promise<{ appId: string; record: FolioRecord; serverKey: string | null; consentUrl: URL }>;

/** The App Authorization id the consent page sent the user back with; a refusal throws FolioError `access_denied`. */
export declare function authorizationFrom(returnedUrl: string | URL): string;

export declare function newRecordId(): string;

export interface AuthorizeOptions {
  key: AppKey;
  appId: string;
  authorizationId?: string | null;
  method: string;
  url: string | URL;
  /** Signed headers, `[lowercaseName, value]`, in the order they are signed. */
  headers?: Array<[string, string]>;
  dialect?: Dialect;
  algorithmLine?: boolean;
  ts?: number;
  nonce?: string;
}

/** The `Authorization` header value for a request. */
export declare function authorize(options: AuthorizeOptions): Promise<string>;

/** A URL with a `bearer` parameter granting GET until `expiresAt`. */
export declare function bearerUrl(options: {
  key: AppKey;
  appId: string;
  authorizationId: string | null;
  url: string | URL;
  expiresAt: number | Date;
  dialect?: Dialect;
}): Promise<URL>;

export declare function newNonce(): string;

/** The version hash (64 hex digits) of a record as received, computed by the core. */
export declare function versionHash(record: object | string): Promise<string>;

/** Loads the wasm core (done by every function that needs it). */
export declare function loadCore(): Promise<unknown>;
