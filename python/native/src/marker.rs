//! The module marker: a fixed-size byte string every torch-nki kernel module exports under the
//! symbol [`SYMBOL`] (declared by `nki_module!`), so that `torch_nki.load` can read the module's
//! protocol and nki-core versions from the library file before mapping it. The text is
//! `torch-nki-module <protocol> <nki-core version>`, NUL-padded to [`LEN`] bytes.

/// The exported symbol's name.
pub const SYMBOL: &str = "TORCH_NKI_MODULE";

/// The marker's size in bytes.
pub const LEN: usize = 64;

/// The marker of this build: [`crate::PROTOCOL_VERSION`] and [`nki_core::VERSION`].
pub const MARKER: [u8; LEN] = marker(crate::PROTOCOL_VERSION, nki_core::VERSION);

const PREFIX: &[u8] = b"torch-nki-module ";

/// `torch-nki-module <protocol> <version>`, NUL-padded (a `const fn`: the marker is a static).
const fn marker(protocol: u32, version: &str) -> [u8; LEN] {
    let mut out = [0u8; LEN];
    let mut n = 0;
    while n < PREFIX.len() {
        out[n] = PREFIX[n];
        n += 1;
    }
    let mut digits = [0u8; 10];
    let (mut d, mut p) = (0, protocol);
    loop {
        digits[d] = b'0' + (p % 10) as u8;
        d += 1;
        p /= 10;
        if p == 0 {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        out[n] = digits[d];
        n += 1;
    }
    out[n] = b' ';
    n += 1;
    let v = version.as_bytes();
    assert!(
        n + v.len() < LEN,
        "the nki-core version does not fit the module marker"
    );
    let mut i = 0;
    while i < v.len() {
        out[n] = v[i];
        n += 1;
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_reads_protocol_and_version() {
        let text = std::str::from_utf8(&marker(12, "0.3.1"))
            .unwrap()
            .to_string();
        assert_eq!(text.trim_end_matches('\0'), "torch-nki-module 12 0.3.1");
        let ours = std::str::from_utf8(&MARKER)
            .unwrap()
            .trim_end_matches('\0')
            .to_string();
        let want = format!(
            "torch-nki-module {} {}",
            crate::PROTOCOL_VERSION,
            nki_core::VERSION
        );
        assert_eq!(ours, want);
    }
}
