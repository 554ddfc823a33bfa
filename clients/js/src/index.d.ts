// Type declarations of folio-client.

/** An app's Ed25519 key pair (WebCrypto) and its public key in standard base64. */
export declare class AppKey {
  readonly privateKey: CryptoKey;
  readonly publicKey: string;
  /** A new key; non-extractable unless `extractable` (to save it, in node). */
  static generate(options?: { extractable?: boolean }): Promise<AppKey>;
  /** The key of a 32-byte seed in base64, as `folio app add` prints it. */
  static fromSeed(seed: string): Promise<AppKey>;
  /** The Ed25519 signature of `bytes`. */
  sign(bytes: Uint8Array): Promise<Uint8Array>;
}

/** The protocol's header and prefix names: the spec's (`svc`) or the original's (`baq`). */
export type Dialect = "svc" | "baq";

export interface AuthorizeOptions {
  key: AppKey;
  /** The app's record id (32 hex digits). */
  appId: string;
  /** The App Authorization record's id; `null` when registering. */
  authorizationId?: string | null;
  method: string;
  /** The full request URL. */
  url: string | URL;
  /** Signed headers, `[lowercaseName, value]`, in the order they are signed. */
  headers?: Array<[string, string]>;
  dialect?: Dialect;
  /** Sign the `ed25519` algorithm line (default true). */
  algorithmLine?: boolean;
  /** Milliseconds since the epoch (default: now). */
  ts?: number;
  /** At most ten characters (default: ten random hex digits). */
  nonce?: string;
}

/** The `Authorization` header value for a request. */
export declare function authorize(options: AuthorizeOptions): Promise<string>;

/** Ten random hex digits. */
export declare function newNonce(): string;

/** The version hash (64 hex digits) of a record as received. */
export declare function versionHash(record: object | string): Promise<string>;

/** Loads the wasm core (done by every function that needs it). */
export declare function loadCore(): Promise<unknown>;
