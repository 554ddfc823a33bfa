// Where the SDK runs, told once for every module that depends on it.

/**
 * Whether this runs in a browser page. A browser may send only the headers
 * the protocol's CORS answer lists, and the body digest header is not among
 * them, so there the signature covers the request but not its body.
 */
export const IN_BROWSER = typeof document !== "undefined";

/** Whether this runs in node (not a browser, not an edge runtime). */
export const IN_NODE = !IN_BROWSER && typeof process !== "undefined"
  && typeof process.versions?.node === "string";
