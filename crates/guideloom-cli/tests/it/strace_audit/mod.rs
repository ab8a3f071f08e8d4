//! The syscall audit of the declared-mount path: runs a command under
//! `strace -f -y -s 4096 -e trace=<TRACED>` and finds the calls it made on paths inside a
//! mount. Mountpoint for S3 has no rename, hard link, symlink or lock (and deletes and
//! truncation only with opt-in flags), while rclone, the stand-in mount of the tests, allows
//! rename and unlink: this audit is what holds the code to Mountpoint's rules.
//!
//! `-y` prints the path of every file descriptor (`3</mnt/x>`, `AT_FDCWD</cwd>`), so a
//! `fcntl` or `flock`, which names a descriptor, and an `*at` call, whose path is relative
//! to a directory descriptor, are attributed to a path too. `-s 4096` keeps path strings
//! whole (strace cuts strings at 32 bytes by default).

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Output};

/// The syscalls traced: every way to rename, link, symlink, delete, truncate or lock.
pub const TRACED: &str =
    "rename,renameat,renameat2,link,linkat,symlink,symlinkat,unlink,unlinkat,ftruncate,flock,fcntl";

/// `fcntl` commands that take or release a lock.
const LOCK_COMMANDS: &[&str] = &[
    "F_SETLK",
    "F_SETLKW",
    "F_SETLK64",
    "F_SETLKW64",
    "F_OFD_SETLK",
    "F_OFD_SETLKW",
];

/// One traced call with the paths it operates on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The syscall; `fcntl` with a lock command is reported as `fcntl F_SETLK…`.
    pub name: String,
    /// The paths it creates, removes, renames, truncates or locks (resolved against the
    /// directory descriptors and the working directory; symlink targets are not included).
    pub paths: Vec<PathBuf>,
    /// The strace line.
    pub line: String,
}

impl Call {
    /// A call Mountpoint refuses outright: rename, hard link, symlink, lock.
    pub fn is_forbidden(&self) -> bool {
        let base = self.name.split(' ').next().unwrap_or("");
        base.starts_with("rename")
            || base.starts_with("link")
            || base.starts_with("symlink")
            || base == "flock"
            || self.name.starts_with("fcntl F_")
    }

    /// Whether the call is a lock (flock, or fcntl with a lock command).
    pub fn is_lock(&self) -> bool {
        self.name == "flock" || self.name.starts_with("fcntl F_")
    }
}

/// What one traced command did on the mount.
#[derive(Debug, Default)]
pub struct Audit {
    /// Calls on paths inside the mount.
    pub on_mount: Vec<Call>,
    /// Calls per syscall on the mount (plain `fcntl` without a lock command included).
    pub counts: BTreeMap<String, usize>,
    /// Traced calls in the whole trace, anywhere.
    pub traced_anywhere: usize,
    /// Whether the trace shows the traced program's exit (the trace is complete).
    pub saw_exit: bool,
}

impl Audit {
    /// The forbidden calls on the mount, as strace lines.
    pub fn forbidden(&self) -> Vec<&str> {
        self.on_mount
            .iter()
            .filter(|c| c.is_forbidden())
            .map(|c| c.line.as_str())
            .collect()
    }

    /// The `unlink*` and `ftruncate` calls on the mount (Mountpoint: only with
    /// `--allow-delete` / never to a non-zero length).
    pub fn deletes_and_truncates(&self) -> Vec<&str> {
        self.on_mount
            .iter()
            .filter(|c| c.name.starts_with("unlink") || c.name == "ftruncate")
            .map(|c| c.line.as_str())
            .collect()
    }
}

/// Runs `cmd` under strace, writing the trace to `trace`; returns the output and the audit
/// of `mount` (the traced command's working directory is `cwd`).
pub fn run_traced(cmd: &Command, trace: &Path, mount: &Path) -> (Output, Audit) {
    let mut traced = Command::new("strace");
    traced
        .args(["-f", "-y", "-s", "4096", "-e"])
        .arg(format!("trace={TRACED}"))
        .arg("-o")
        .arg(trace)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => traced.env(k, v),
            None => traced.env_remove(k),
        };
    }
    let cwd = cmd
        .get_current_dir()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| std::env::current_dir().unwrap());
    traced.current_dir(&cwd);
    let output = traced.output().expect("run strace");
    let text = std::fs::read_to_string(trace)
        .unwrap_or_else(|e| panic!("strace wrote no trace at {}: {e}", trace.display()));
    (output, audit(&text, &cwd, mount))
}

/// Audits strace output `text` for calls on `mount`.
pub fn audit(text: &str, cwd: &Path, mount: &Path) -> Audit {
    let mut out = Audit::default();
    for line in text.lines() {
        let body = strip_pid(line);
        if body.starts_with("+++ exited with") || body.starts_with("+++ killed by") {
            out.saw_exit = true;
        }
        let Some(call) = parse_line(line, cwd) else {
            continue;
        };
        out.traced_anywhere += 1;
        if call.paths.iter().any(|p| p.starts_with(mount)) {
            *out.counts.entry(call.name.clone()).or_default() += 1;
            out.on_mount.push(call);
        }
    }
    out
}

/// `12345  rest` → `rest` (strace `-f` prefixes each line with the thread id).
fn strip_pid(line: &str) -> &str {
    let trimmed = line.trim_start();
    let digits = trimmed.len()
        - trimmed
            .trim_start_matches(|c: char| c.is_ascii_digit())
            .len();
    if digits > 0 && trimmed[digits..].starts_with(' ') {
        trimmed[digits..].trim_start()
    } else {
        trimmed
    }
}

/// One argument of a traced call.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Arg {
    /// A string (a path).
    Str(String),
    /// A descriptor with the path strace resolved (`-y`), if any.
    Fd(Option<PathBuf>),
    /// Anything else (flags, numbers, structures).
    Other(String),
}

/// Parses one strace line into a call, or `None` for signals, exits, `resumed` halves and
/// syscalls not traced here.
pub fn parse_line(line: &str, cwd: &Path) -> Option<Call> {
    let body = strip_pid(line);
    let open = body.find('(')?;
    let name = &body[..open];
    if !TRACED.split(',').any(|t| t == name) {
        return None;
    }
    let args = split_args(&body[open + 1..]);
    let at = |i: usize| args.get(i);
    let resolve = |dir: Option<&Arg>, path: Option<&Arg>| -> Option<PathBuf> {
        let Some(Arg::Str(p)) = path else {
            return None;
        };
        let base = match dir {
            Some(Arg::Fd(Some(d))) => d.clone(),
            _ => cwd.to_path_buf(),
        };
        Some(normalize(&base.join(p)))
    };
    let fd_path = |i: usize| match at(i) {
        Some(Arg::Fd(Some(p))) => Some(p.clone()),
        _ => None,
    };
    let mut call_name = name.to_owned();
    let paths: Vec<Option<PathBuf>> = match name {
        "rename" | "link" => vec![resolve(None, at(0)), resolve(None, at(1))],
        "renameat" | "renameat2" | "linkat" => {
            vec![resolve(at(0), at(1)), resolve(at(2), at(3))]
        }
        "symlink" => vec![resolve(None, at(1))],
        "symlinkat" => vec![resolve(at(1), at(2))],
        "unlink" => vec![resolve(None, at(0))],
        "unlinkat" => vec![resolve(at(0), at(1))],
        "ftruncate" | "flock" => vec![fd_path(0)],
        "fcntl" => {
            if let Some(Arg::Other(cmd)) = at(1)
                && LOCK_COMMANDS.contains(&cmd.as_str())
            {
                call_name = format!("fcntl {cmd}");
            }
            vec![fd_path(0)]
        }
        _ => Vec::new(),
    };
    Some(Call {
        name: call_name,
        paths: paths.into_iter().flatten().collect(),
        line: line.to_owned(),
    })
}

/// Splits `a, "b", 3</p>, {x=1, y=2}) = 0` into its top-level arguments (up to the closing
/// parenthesis, or the end of an `<unfinished ...>` line).
fn split_args(rest: &str) -> Vec<Arg> {
    let mut args = Vec::new();
    let mut chars = rest.chars().peekable();
    let mut current = String::new();
    let mut string: Option<String> = None;
    let mut fd_path: Option<String> = None;
    let mut depth = 0usize;
    let finish = |current: &mut String,
                  string: &mut Option<String>,
                  fd_path: &mut Option<String>,
                  args: &mut Vec<Arg>| {
        let text = current.trim().to_owned();
        current.clear();
        if let Some(s) = string.take() {
            args.push(Arg::Str(s));
        } else if let Some(p) = fd_path.take() {
            args.push(Arg::Fd(Some(PathBuf::from(p))));
        } else if text.is_empty() {
        } else if is_descriptor(&text) {
            args.push(Arg::Fd(None));
        } else {
            args.push(Arg::Other(text));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '"' if depth == 0 => {
                let mut s = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => s.push_str(&unescape(&mut chars)),
                        c => s.push(c),
                    }
                }
                string = Some(s);
            }
            '<' if depth == 0 && is_descriptor(current.trim()) => {
                // `3</path>` / `AT_FDCWD</path>`: the path runs to the `>` that ends the
                // argument.
                let mut p = String::new();
                while let Some(c) = chars.next() {
                    if c == '>' && matches!(chars.peek(), Some(',' | ')') | None) {
                        break;
                    }
                    p.push(c);
                }
                fd_path = Some(p);
            }
            '{' | '[' => {
                depth += 1;
                current.push(c);
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                current.push(c);
            }
            ',' if depth == 0 => finish(&mut current, &mut string, &mut fd_path, &mut args),
            ')' if depth == 0 => break,
            '<' if depth == 0 => break, // `<unfinished ...>`
            c => current.push(c),
        }
    }
    finish(&mut current, &mut string, &mut fd_path, &mut args);
    args
}

/// `3` or `AT_FDCWD`: an argument strace annotates with `<path>` under `-y`.
fn is_descriptor(text: &str) -> bool {
    text == "AT_FDCWD" || (!text.is_empty() && text.chars().all(|c| c.is_ascii_digit()))
}

/// One escape of an strace string after the backslash: `\"`, `\\`, `\n`, `\t`, `\xNN`, octal.
fn unescape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> String {
    match chars.next() {
        Some('n') => "\n".into(),
        Some('t') => "\t".into(),
        Some('x') => {
            let hex: String = chars.by_ref().take(2).collect();
            u8::from_str_radix(&hex, 16)
                .map(|b| char::from(b).to_string())
                .unwrap_or_default()
        }
        Some(d @ '0'..='7') => {
            let mut oct = d.to_string();
            while oct.len() < 3 && chars.peek().is_some_and(|c| ('0'..='7').contains(c)) {
                oct.push(chars.next().unwrap_or('0'));
            }
            u8::from_str_radix(&oct, 8)
                .map(|b| char::from(b).to_string())
                .unwrap_or_default()
        }
        Some(c) => c.to_string(),
        None => String::new(),
    }
}

/// `a/./b/../c` → `a/c`, lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[test]
fn the_audit_finds_each_kind_of_call_on_the_mount_and_nothing_else() {
    let trace = r#"101  renameat2(AT_FDCWD</work>, "/mnt/b/x/.a.tmp", AT_FDCWD</work>, "/mnt/b/x/a", RENAME_NOREPLACE) = 0
101  linkat(5</mnt/b/x/shards/w>, ".0.glm.1.2.tmp", 5</mnt/b/x/shards/w>, "0.glm", 0) = -1 EIO (Input/output error)
102  symlinkat("/etc/passwd", 7</mnt/b/x>, "s") = 0
102  symlink("/mnt/b/x/target", "/tmp/elsewhere") = 0
101  flock(9</mnt/b/x/annotations/.catalog.json.lock>, LOCK_EX <unfinished ...>
101  <... flock resumed>)              = 0
103  fcntl(9</mnt/b/x/log/1.json>, F_SETLKW, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=0, l_len=0}) = 0
103  fcntl(9</mnt/b/x/log/1.json>, F_GETFL) = 0x8001 (flags O_WRONLY|O_LARGEFILE)
103  fcntl(4</tmp/staging>, F_SETLK, {l_type=F_WRLCK}) = 0
104  unlinkat(AT_FDCWD</mnt/b>, "x/../x/gone", 0) = 0
104  unlink("/tmp/.tmpAbc") = 0
104  rename("rel", "/tmp/out") = 0
105  ftruncate(3</mnt/b/x/shards/w/1.glm>, 0) = 0
105  openat(AT_FDCWD</work>, "/mnt/b/x/a", O_RDONLY) = 3
105  --- SIGCHLD {si_signo=SIGCHLD} ---
101  +++ exited with 0 +++
"#;
    let a = audit(trace, Path::new("/mnt/b"), Path::new("/mnt/b"));
    assert!(a.saw_exit);
    // The `rename("rel", ...)` resolves against the working directory, here in the mount.
    let names: Vec<&str> = a.on_mount.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "renameat2",
            "linkat",
            "symlinkat",
            "flock",
            "fcntl F_SETLKW",
            "fcntl",
            "unlinkat",
            "rename",
            "ftruncate"
        ]
    );
    assert_eq!(a.forbidden().len(), 6, "{:?}", a.forbidden());
    assert_eq!(a.deletes_and_truncates().len(), 2);
    assert_eq!(a.counts["fcntl"], 1);
    assert_eq!(a.traced_anywhere, 12);
    assert_eq!(
        a.on_mount[6].paths,
        [PathBuf::from("/mnt/b/x/gone")],
        "relative to the directory descriptor, normalized"
    );
    // Outside the mount nothing counts, whatever the call.
    let b = audit(trace, Path::new("/work"), Path::new("/srv/other"));
    assert!(b.on_mount.is_empty(), "{:?}", b.on_mount);
    // Escapes in strings.
    let c = parse_line(r#"1 unlink("/m/a\"b\\c\x41\101")"#, Path::new("/")).unwrap();
    assert_eq!(c.paths, [PathBuf::from("/m/a\"b\\cAA")]);
}
