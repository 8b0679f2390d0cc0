//! Self-describing log lines on stderr: `satlink <role> <LEVEL> message key=value ...`.

use std::sync::OnceLock;

static ROLE: OnceLock<&'static str> = OnceLock::new();

pub fn set_role(role: &'static str) {
    let _ = ROLE.set(role);
}

pub fn role() -> &'static str {
    ROLE.get().copied().unwrap_or("-")
}

#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { eprintln!("satlink {} INFO {}", $crate::log::role(), format_args!($($arg)*)) };
}

#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { eprintln!("satlink {} WARN {}", $crate::log::role(), format_args!($($arg)*)) };
}
