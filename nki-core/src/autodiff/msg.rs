//! A fixed-capacity message buffer usable in `const` evaluation, so compile-time checks can
//! report names in their panic messages.

/// Bytes a [`ConstMsg`] holds; longer messages are cut (at a character boundary).
pub const CAPACITY: usize = 480;

/// A message assembled in a `const` context: `ConstMsg::new().push("a").push(name)`.
#[derive(Clone, Copy, Debug)]
pub struct ConstMsg {
    buf: [u8; CAPACITY],
    len: usize,
}

impl ConstMsg {
    /// An empty message.
    pub const fn new() -> ConstMsg {
        ConstMsg {
            buf: [0; CAPACITY],
            len: 0,
        }
    }

    /// Appends `s` (as much of it as fits, whole characters only).
    pub const fn push(mut self, s: &str) -> ConstMsg {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            // Stop at a character that does not fit whole.
            let width = utf8_width(b[i]);
            if self.len + width > CAPACITY {
                break;
            }
            let mut k = 0;
            while k < width {
                self.buf[self.len] = b[i + k];
                self.len += 1;
                k += 1;
            }
            i += width;
        }
        self
    }

    /// Appends `items` separated by `", "`, or `none` when empty.
    pub const fn push_list(mut self, items: &[&str]) -> ConstMsg {
        if items.is_empty() {
            return self.push("none");
        }
        let mut i = 0;
        while i < items.len() {
            if i > 0 {
                self = self.push(", ");
            }
            self = self.push(items[i]);
            i += 1;
        }
        self
    }

    /// The message text.
    pub const fn as_str(&self) -> &str {
        match core::str::from_utf8(self.buf.split_at(self.len).0) {
            Ok(s) => s,
            // `push` only appends whole UTF-8 characters.
            Err(_) => "(message was not UTF-8)",
        }
    }
}

impl Default for ConstMsg {
    fn default() -> Self {
        ConstMsg::new()
    }
}

const fn utf8_width(first: u8) -> usize {
    if first < 0x80 {
        1
    } else if first >= 0xF0 {
        4
    } else if first >= 0xE0 {
        3
    } else {
        2
    }
}

/// Whether two strings are equal, in `const` context.
pub(crate) const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// `s` without `prefix`, if it starts with it.
pub(crate) const fn strip_prefix<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let (sb, pb) = (s.as_bytes(), prefix.as_bytes());
    if sb.len() < pb.len() {
        return None;
    }
    let mut i = 0;
    while i < pb.len() {
        if sb[i] != pb[i] {
            return None;
        }
        i += 1;
    }
    match core::str::from_utf8(sb.split_at(pb.len()).1) {
        Ok(rest) => Some(rest),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_messages_and_cuts_at_capacity() {
        let m = ConstMsg::new().push("a ").push_list(&["x", "y"]).push(" é");
        assert_eq!(m.as_str(), "a x, y é");
        let long = "é".repeat(CAPACITY);
        assert_eq!(ConstMsg::new().push(&long).as_str().len(), CAPACITY);
        assert_eq!(ConstMsg::new().push_list(&[]).as_str(), "none");
    }

    #[test]
    fn compares_and_strips_in_const() {
        const EQ: bool = str_eq("grad_y", "grad_y");
        const STRIPPED: Option<&str> = strip_prefix("grad_y", "grad_");
        assert!(EQ && !str_eq("a", "ab"));
        assert_eq!(STRIPPED, Some("y"));
        assert_eq!(strip_prefix("gr", "grad_"), None);
    }
}
