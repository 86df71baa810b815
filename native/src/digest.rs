//! HMAC-SHA256 truncated to 128 bits, as `otel_loopguard/canon/keys.py` computes it,
//! with the state after a message prefix kept (one per domain and tool).
#![deny(unsafe_code)]

use hmac::{Hmac, Mac};
use sha2::Sha256;

pub type State = Hmac<Sha256>;
pub const DIGEST_BYTES: usize = 16;

pub fn keyed(secret: &[u8]) -> State {
    // HMAC accepts keys of any length (longer than a block: hashed first, as keys.py does).
    <State as Mac>::new_from_slice(secret).expect("HMAC takes keys of any length")
}

/// digest(prefix + parts...) as 32 lowercase hex characters.
pub fn hex_digest(prefixed: &State, parts: &[&[u8]]) -> String {
    let mut mac = prefixed.clone();
    for part in parts {
        mac.update(part);
    }
    let full = mac.finalize().into_bytes();
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(DIGEST_BYTES * 2);
    for b in &full[..DIGEST_BYTES] {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 0xf) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc4231_case_2_truncated() {
        // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?"
        let mut state = keyed(b"Jefe");
        state.update(b"what do ya ");
        assert_eq!(hex_digest(&state, &[b"want for nothing?"]), "5bdcc146bf60754e6a042426089575c7");
    }
}
