// Included (`include!`) by the core tests that read `../shared`, natively and in wasm.

/// The text of a file under `../shared`: read from disk natively, embedded
/// at compile time in wasm32 (which has no file system).
macro_rules! shared_file {
    ($path:literal) => {{
        #[cfg(target_arch = "wasm32")]
        let text =
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/", $path)).to_owned();
        #[cfg(not(target_arch = "wasm32"))]
        let text =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/", $path))
                .expect(concat!(
                    "../shared/",
                    $path,
                    " must sit beside the repository"
                ));
        text
    }};
}
