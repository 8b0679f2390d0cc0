//! An archive's files read as untrusted input, by the same rules as Clarke's runner
//! (`clarke/sites/archive_files.py`): each file opened relative to the archive's
//! directory and never through a link (`O_NOFOLLOW`, after `fstatat` without following
//! it: no FIFO or device is ever opened), regular files only, a body's size on disk the
//! size `site.json` declares before a byte is read, and the limits below: one body, all
//! the distinct bodies together, `site.json`.

use std::ffi::CString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

pub const MIB: u64 = 1 << 20;
/// `site.json` may have at most this many bytes (as the runner's `INDEX_MB`).
pub const INDEX_BYTES: u64 = 64 * MIB;
/// The runner's defaults (`DEFAULT_BODY_MB`, `DEFAULT_SITE_MB`); it passes the limits
/// in force with `--site-max-body-mb` and `--site-max-mb`.
pub const DEFAULT_BODY_MB: u64 = 64;
pub const DEFAULT_SITE_MB: u64 = 512;

/// What one archive may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub body_bytes: u64,
    pub site_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            body_bytes: DEFAULT_BODY_MB * MIB,
            site_bytes: DEFAULT_SITE_MB * MIB,
        }
    }
}

impl Limits {
    /// Why a body of `size` bytes is refused, if it is.
    pub fn body_breach(&self, size: u64) -> Option<String> {
        (size > self.body_bytes).then(|| {
            format!(
                "more than the {} MiB one body may hold (--site-max-body-mb raises it)",
                self.body_bytes / MIB
            )
        })
    }

    /// Why an archive whose distinct bodies hold `size` bytes is refused, if it is.
    pub fn site_breach(&self, size: u64) -> Option<String> {
        (size > self.site_bytes).then(|| {
            format!(
                "its bodies hold {size} bytes or more, more than the {} MiB an archive may \
                 hold (--site-max-mb raises it)",
                self.site_bytes / MIB
            )
        })
    }
}

fn kind(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        libc::S_IFSOCK => "a socket",
        _ => "of an unknown kind",
    }
}

/// A directory, open: its entries opened by name, never through links.
pub struct Dir {
    fd: OwnedFd,
}

impl Dir {
    /// The archive's own directory (the runner's choice: it may be reached through
    /// links; what is inside it may not).
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = File::open(path)?;
        if !file.metadata()?.is_dir() {
            return Err(std::io::Error::other("not a directory"));
        }
        Ok(Self { fd: file.into() })
    }

    /// `name` in this directory, as `S_IFDIR` or `S_IFREG` wants, without following a
    /// link; `what` names it in errors, `missing` is the error where it is absent.
    fn open_entry(&self, name: &str, directory: bool, what: &str, missing: &str) -> Result<OwnedFd, String> {
        let c_name = CString::new(name).map_err(|_| format!("{what}: a NUL in its name"))?;
        // SAFETY: fstatat writes a `stat` into the zeroed buffer it is given; the
        // directory descriptor and the C string outlive the call.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let rc = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                c_name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(if e.kind() == std::io::ErrorKind::NotFound {
                missing.to_owned()
            } else {
                format!("{what} cannot be read: {e}")
            });
        }
        let (wanted, want_name) = if directory {
            (libc::S_IFDIR, "a directory")
        } else {
            (libc::S_IFREG, "a regular file")
        };
        if st.st_mode & libc::S_IFMT != wanted {
            return Err(format!("{what} is {}, not {want_name}", kind(st.st_mode)));
        }
        let mut flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;
        if directory {
            flags |= libc::O_DIRECTORY;
        }
        // SAFETY: openat takes a valid directory descriptor and a NUL-terminated name;
        // a non-negative result is a descriptor this process now owns.
        let fd = unsafe { libc::openat(self.fd.as_raw_fd(), c_name.as_ptr(), flags) };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ELOOP) | Some(libc::ENOTDIR) => format!("{what} is a symbolic link"),
                _ => format!("{what} cannot be opened: {e}"),
            });
        }
        // SAFETY: `fd` was just returned by openat and is owned by nobody else.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        let meta = File::from(owned.try_clone().map_err(|e| format!("{what}: {e}"))?).metadata();
        match meta {
            Ok(m) if (directory && m.is_dir()) || (!directory && m.is_file()) => Ok(owned),
            Ok(_) => Err(format!("{what} changed kind while it was opened")),
            Err(e) => Err(format!("{what} cannot be read: {e}")),
        }
    }

    /// The subdirectory `name` (never a link).
    pub fn subdir(&self, name: &str, what: &str) -> Result<Dir, String> {
        let fd = self.open_entry(name, true, what, &format!("{what} is missing"))?;
        Ok(Dir { fd })
    }

    /// Exactly `size` bytes of the regular file `name`, which must have that size on
    /// disk before it is read (at most `max` bytes where `size` is None: the file's own
    /// size then, up to `max`).
    pub fn read_file(
        &self,
        name: &str,
        size: Option<u64>,
        max: u64,
        what: &str,
        missing: &str,
    ) -> Result<Vec<u8>, String> {
        let fd = self.open_entry(name, false, what, missing)?;
        let mut file = File::from(fd);
        let on_disk = file
            .metadata()
            .map_err(|e| format!("{what} cannot be read: {e}"))?
            .len();
        let want = match size {
            Some(s) if s != on_disk => return Err(format!("{what} has {on_disk} bytes, size says {s}")),
            Some(s) => s,
            None if on_disk > max => {
                return Err(format!(
                    "{what} has {on_disk} bytes, more than the {} MiB it may have",
                    max / MIB
                ))
            }
            None => on_disk,
        };
        let mut data = Vec::with_capacity(want as usize);
        (&mut file)
            .take(want + 1)
            .read_to_end(&mut data)
            .map_err(|e| format!("{what} cannot be read: {e}"))?;
        match (data.len() as u64).cmp(&want) {
            std::cmp::Ordering::Less => Err(format!("{what} ended after {} of its {want} bytes", data.len())),
            std::cmp::Ordering::Greater => {
                Err(format!("{what} grew past its {want} bytes while it was read"))
            }
            std::cmp::Ordering::Equal => Ok(data),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn scratch(name: &str) -> std::path::PathBuf {
        crate::scratch::scratch(&format!("files-{name}"))
    }

    #[test]
    fn reads_regular_files_of_their_declared_size_only() {
        let dir = scratch("regular");
        std::fs::write(dir.join("a"), b"hello").unwrap();
        symlink(dir.join("a"), dir.join("link")).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        let d = Dir::open(&dir).unwrap();
        assert_eq!(d.read_file("a", Some(5), 10, "a", "gone").unwrap(), b"hello");
        assert_eq!(
            d.read_file("a", Some(4), 10, "a", "gone").unwrap_err(),
            "a has 5 bytes, size says 4"
        );
        assert_eq!(
            d.read_file("a", None, 4, "a", "gone").unwrap_err(),
            "a has 5 bytes, more than the 0 MiB it may have"
        );
        assert_eq!(
            d.read_file("link", Some(5), 10, "link", "gone").unwrap_err(),
            "link is a symbolic link, not a regular file"
        );
        assert_eq!(
            d.read_file("sub", None, 10, "sub", "gone").unwrap_err(),
            "sub is a directory, not a regular file"
        );
        assert_eq!(d.read_file("none", None, 10, "none", "gone").unwrap_err(), "gone");
        assert!(d.subdir("sub", "sub/").is_ok());
        symlink(dir.join("sub"), dir.join("sublink")).unwrap();
        assert_eq!(
            d.subdir("sublink", "sublink/").err().unwrap(),
            "sublink/ is a symbolic link, not a directory"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn never_opens_a_fifo() {
        let dir = scratch("fifo");
        let c = CString::new(dir.join("f").to_str().unwrap()).unwrap();
        // SAFETY: mkfifo takes a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let d = Dir::open(&dir).unwrap();
        assert_eq!(
            d.read_file("f", Some(1), 10, "f", "gone").unwrap_err(),
            "f is a FIFO, not a regular file"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn limits_name_their_options() {
        let l = Limits {
            body_bytes: MIB,
            site_bytes: 2 * MIB,
        };
        assert!(l.body_breach(MIB).is_none());
        assert!(l.body_breach(MIB + 1).unwrap().contains("--site-max-body-mb"));
        assert!(l.site_breach(2 * MIB + 1).unwrap().contains("--site-max-mb"));
    }
}
