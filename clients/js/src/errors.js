// Problems (RFC 9457, PROTOCOL.md §11) as errors an app can tell apart:
// `code` is the protocol's snake_case name, `status` the HTTP status.

/** A request the server refused, or an answer that was not what the protocol says. */
export class FolioError extends Error {
  constructor({ status, code, type = null, title = null, detail = null, problem = null }) {
    super(detail ? `${title ?? code}: ${detail}` : (title ?? code));
    this.name = "FolioError";
    this.status = status;
    this.code = code;
    this.type = type;
    this.title = title;
    this.detail = detail;
    /** The whole problem object, when the server sent one. */
    this.problem = problem;
  }

  /** The error a response carries (its problem+json, or its status alone). */
  static async from(response) {
    const contentType = response.headers.get("content-type") ?? "";
    if (contentType.startsWith("application/problem+json")) {
      const problem = await response.json().catch(() => null);
      if (problem && typeof problem.code === "string") {
        return new FolioError({
          status: response.status,
          code: problem.code,
          type: problem.type ?? null,
          title: problem.title ?? null,
          detail: problem.detail ?? null,
          problem,
        });
      }
    }
    return new FolioError({ status: response.status, code: "http_error", title: `HTTP ${response.status}` });
  }
}
