// The wasm core (clients/js/wasm, built by `npm run build` into pkg/):
// loaded once, from the file beside this package in node and by URL in
// browsers.
import init, * as core from "../pkg/folio_core.js";

const wasmUrl = new URL("../pkg/folio_core_bg.wasm", import.meta.url);
let loading;

/**
 * Loads the wasm core once; every SDK function that needs it awaits this.
 * Answers the module's exports (`versionHash`, `checkVersionHashes`,
 * `TypeChecker`, `signatureInput`, …: clients/js/wasm/src/lib.rs).
 */
export function loadCore() {
  loading ??= (async () => {
    if (wasmUrl.protocol === "file:") {
      const { readFile } = await import("node:fs/promises");
      core.initSync({ module: await readFile(wasmUrl) });
    } else {
      await init({ module_or_path: wasmUrl });
    }
    return core;
  })();
  return loading;
}
