//! A stored password hash, as an archive may carry one (issue 40, finding
//! 4): checking any text against the server's argon2 policy never panics,
//! and what it accepts is an argon2id PHC string with exactly the policy's
//! parameters, so a sign-in against it costs what the server's own hashes
//! cost.

#![no_main]

use folio_core::service::consent::{
    PASSWORD_LANES, PASSWORD_MEMORY_KIB, PASSWORD_PASSES, check_password_hash,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if check_password_hash(text).is_err() {
        return;
    }
    for parameter in [
        format!("m={PASSWORD_MEMORY_KIB}"),
        format!("t={PASSWORD_PASSES}"),
        format!("p={PASSWORD_LANES}"),
    ] {
        assert!(text.contains(&parameter), "{text:?} lacks {parameter}");
    }
    assert!(text.starts_with("$argon2id$v=19$"), "{text:?}");
});
