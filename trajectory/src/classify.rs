//! What a tool call does: read, probe, write, execute, git, or other.
//!
//! Tools are classified by name first (after lower-casing and dropping `_`/`-`, and looking at
//! the last part of namespaced names such as `mcp__fs__read_file` or `functions.bash`). Shell
//! tools are classified by their command with [`classify_command`]:
//!
//! - the command is split into simple commands on `&&`, `||`, `;`, `|`, `&` and newlines,
//!   outside quotes; a here-document's body belongs to the command that opened it;
//! - leading `NAME=value` assignments, `env`, `sudo`, `timeout N`, `time`, `nohup`, `nice`,
//!   `command`, `exec` and shell keywords (`if`, `then`, `do`…) are skipped; `xargs CMD` is
//!   classified as `CMD`; `bash -c SCRIPT` (or a script fed to `bash` by here-document) is
//!   classified as `SCRIPT`;
//! - `cd`, `export`, `source`, `set` and similar commands that only change the shell's state
//!   count for nothing;
//! - each remaining command is mapped by its verb (see the tables below); an output redirection
//!   into a file (`>`, `>>`, `&>`, not `/dev/…` or `2>&1`) makes it a Write whatever the verb,
//!   since the agent created or changed a file (so `pytest > /tmp/log` is a Write too);
//! - a Read or Probe verb that reads a pipe (`… | head`, `… | grep x`, `… | wc -l`) only filters
//!   the previous command's output and counts for nothing; `cat` printing a here-document with no
//!   file operand is Other (like `echo`), and Write when redirected into a file;
//! - the command's action is the most significant of its parts, in the order
//!   Write > Execute > Git > Read > Probe > Other ([`Action::significance`]); a command with no
//!   part that counts (`cd repo`) is Other.

use serde_json::Value;

use super::shell::{self, Segment};
use super::Action;

/// Nesting limit for `bash -c` inside `bash -c`…
const MAX_DEPTH: usize = 8;

/// Classifies a tool call by its name and arguments; for shell tools also returns the command
/// that ran (with a `bash -lc`/`sh -c` wrapper removed).
pub fn classify_tool(name: &str, arguments: &Value) -> (Action, Option<String>) {
    let lower = name.to_lowercase();
    let short_lower = lower.rsplit("__").next().unwrap_or(&lower);
    let short_lower = short_lower.rsplit('.').next().unwrap_or(short_lower);
    let full = normalise(&lower);
    let short = normalise(short_lower);
    for candidate in [full.as_str(), short.as_str()] {
        if SHELL_TOOLS.contains(&candidate) {
            let command = shell_command(arguments);
            let action = command.as_deref().map_or(Action::Other, classify_command);
            return (action, command);
        }
        if EDITOR_TOOLS.contains(&candidate) {
            return (editor_action(arguments), None);
        }
        if READ_TOOLS.contains(&candidate) {
            return (Action::Read, None);
        }
        if PROBE_TOOLS.contains(&candidate) {
            return (Action::Probe, None);
        }
        if WRITE_TOOLS.contains(&candidate) {
            return (Action::Write, None);
        }
    }
    let original_short = name.rsplit("__").next().unwrap_or(name);
    let original_short = original_short.rsplit('.').next().unwrap_or(original_short);
    let camel_git = original_short.strip_prefix("Git").is_some_and(|rest| rest.starts_with(|c: char| c.is_uppercase()));
    if short_lower == "git" || short_lower.starts_with("git_") || short_lower.starts_with("git-") || camel_git {
        return (Action::Git, None);
    }
    (Action::Other, None)
}

/// Classifies a shell command line (see the module documentation for the rules).
pub fn classify_command(command: &str) -> Action {
    command_action(command, 0).unwrap_or(Action::Other)
}

fn normalise(name: &str) -> String {
    name.chars().filter(|c| *c != '_' && *c != '-').collect()
}

// Tool names, lower-cased without `_` and `-`.
#[rustfmt::skip]
const SHELL_TOOLS: &[&str] = &[
    "shell", "bash", "sh", "zsh", "exec", "localshell", "runcommand", "container.exec", "shellcommand",
    "execcommand", "executebash", "executecommand", "executeshell", "runshellcommand", "runterminalcmd",
    "runterminalcommand", "runinterminal", "runbash", "terminal", "cmd", "powershell",
];
/// Tools whose `command` argument says whether they view or edit (`str_replace_editor`…).
const EDITOR_TOOLS: &[&str] = &["strreplaceeditor", "strreplacebasededittool", "texteditor", "edittool", "fileeditor"];
#[rustfmt::skip]
const READ_TOOLS: &[&str] = &[
    "read", "readfile", "readfiles", "readmanyfiles", "view", "viewfile", "viewimage", "cat", "open",
    "openfile", "notebookread", "readnotebook", "getfile", "getfilecontents",
];
#[rustfmt::skip]
const PROBE_TOOLS: &[&str] = &[
    "grep", "glob", "search", "listdir", "ls", "find", "listfiles", "listdirectory", "searchfiles",
    "filesearch", "findfiles", "grepfiles", "grepsearch", "codebasesearch", "searchcode", "searchfilecontent",
    "ripgrep", "tree", "fileglob",
];
#[rustfmt::skip]
const WRITE_TOOLS: &[&str] = &[
    "write", "writefile", "writetofile", "edit", "editfile", "multiedit", "notebookedit", "editnotebook",
    "applypatch", "strreplace", "searchreplace", "replace", "replaceinfile", "create", "createfile", "insert",
    "patch", "deletefile", "movefile", "createdirectory",
];

fn editor_action(arguments: &Value) -> Action {
    match arguments.get("command").and_then(Value::as_str) {
        Some("view") => Action::Read,
        Some("create" | "str_replace" | "insert" | "undo_edit" | "write" | "edit" | "delete") => Action::Write,
        _ => Action::Other,
    }
}

/// The command a shell tool ran: a string, an argv array (`["bash", "-lc", "…"]`), or such a
/// value under `command`, `cmd`, `argv`, `script` or `commands`, or under `action` (Responses'
/// `local_shell_call`).
pub(crate) fn shell_command(arguments: &Value) -> Option<String> {
    match arguments {
        Value::String(text) if !text.trim().is_empty() => Some(unwrap_shell(text)),
        Value::Array(argv) => argv_command(argv),
        Value::Object(map) => {
            for key in ["command", "cmd", "argv", "script"] {
                match map.get(key) {
                    Some(Value::String(text)) if !text.trim().is_empty() => return Some(unwrap_shell(text)),
                    Some(Value::Array(argv)) => return argv_command(argv),
                    _ => {}
                }
            }
            if let Some(Value::Array(commands)) = map.get("commands") {
                let scripts: Vec<String> = commands.iter().filter_map(Value::as_str).map(unwrap_shell).collect();
                return (!scripts.is_empty()).then(|| scripts.join("\n"));
            }
            map.get("action").and_then(shell_command)
        }
        _ => None,
    }
}

fn argv_command(argv: &[Value]) -> Option<String> {
    let words: Vec<String> = argv.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect();
    if words.is_empty() {
        return None;
    }
    if let ShellInput::Script(script) = shell_input(&words[0], &words[1..]) {
        return Some(unwrap_shell(script));
    }
    Some(words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" "))
}

/// Removes a `bash -lc '…'`/`sh -c "…"` wrapper around a whole command.
fn unwrap_shell(command: &str) -> String {
    let mut current = command.to_string();
    for _ in 0..MAX_DEPTH {
        let segments = shell::split(&current);
        let [segment] = segments.as_slice() else { break };
        if !segment.redirects.is_empty() || segment.stdin_text.is_some() || segment.words.is_empty() {
            break;
        }
        match shell_input(&segment.words[0], &segment.words[1..]) {
            ShellInput::Script(script) => current = script.to_string(),
            _ => break,
        }
    }
    current
}

fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%^~".contains(c) || !c.is_ascii());
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

enum ShellInput<'a> {
    /// `bash -c SCRIPT`.
    Script(&'a str),
    /// `bash FILE`.
    File,
    /// `bash` reading its standard input.
    Stdin,
    /// Not a shell.
    NotShell,
}

fn shell_input<'a>(head: &str, args: &'a [String]) -> ShellInput<'a> {
    if !matches!(basename(head), "bash" | "sh" | "zsh" | "dash" | "ksh") {
        return ShellInput::NotShell;
    }
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "-o" || arg == "+o" || arg == "-O" || arg == "+O" {
            iter.next();
        } else if arg == "--" {
            return if iter.next().is_some() { ShellInput::File } else { ShellInput::Stdin };
        } else if arg.starts_with("--") {
            continue;
        } else if let Some(flags) = arg.strip_prefix('-').or_else(|| arg.strip_prefix('+')) {
            if flags.contains('c') {
                return match iter.next() {
                    Some(script) => ShellInput::Script(script),
                    None => ShellInput::Stdin,
                };
            }
        } else {
            return ShellInput::File;
        }
    }
    ShellInput::Stdin
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn command_action(command: &str, depth: usize) -> Option<Action> {
    if depth > MAX_DEPTH {
        return Some(Action::Execute);
    }
    shell::split(command).iter().filter_map(|segment| segment_action(segment, depth)).max_by_key(|a| a.significance())
}

fn segment_action(segment: &Segment, depth: usize) -> Option<Action> {
    let verb = verb_action(&segment.words, segment.stdin_text.as_deref(), segment.piped, depth);
    if segment.redirects.iter().any(|r| r.writes_file()) {
        Some(Action::Write)
    } else {
        verb
    }
}

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else { return false };
    let name = name.strip_suffix('+').unwrap_or(name);
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Skips `-x` flags, and the value of those listed in `with_value`, from `k`.
fn skip_flags(words: &[String], mut k: usize, with_value: &[&str]) -> usize {
    while let Some(word) = words.get(k) {
        if !word.starts_with('-') || word == "-" {
            break;
        }
        k += if with_value.contains(&word.as_str()) { 2 } else { 1 };
        if word == "--" {
            break;
        }
    }
    k
}

/// The action of one simple command given as words; `None` when it counts for nothing.
fn verb_action(words: &[String], stdin_text: Option<&str>, piped: bool, depth: usize) -> Option<Action> {
    let mut k = 0;
    loop {
        let word = words.get(k)?.as_str();
        match word {
            "!" | "{" | "}" | "(" | ")" | "if" | "then" | "else" | "elif" | "do" | "while" | "until" | "exec"
            | "builtin" | "nohup" | "coproc" => k += 1,
            "for" | "case" | "select" | "function" | "in" | "done" | "fi" | "esac" | ";;" => return None,
            "time" => k = skip_flags(words, k + 1, &[]),
            "sudo" | "doas" => k = skip_flags(words, k + 1, &["-u", "-g", "-C", "-D", "-h", "-p", "-U", "-r", "-t"]),
            "timeout" => {
                k = skip_flags(words, k + 1, &["-s", "-k", "--signal", "--kill-after"]);
                if words.get(k).is_some_and(|w| w.starts_with(|c: char| c.is_ascii_digit())) {
                    k += 1;
                }
            }
            "nice" | "ionice" | "stdbuf" | "chrt" | "taskset" => k = skip_flags(words, k + 1, &["-n", "-c", "-p"]),
            "env" => {
                k += 1;
                while let Some(w) = words.get(k) {
                    if matches!(w.as_str(), "-u" | "-C" | "-S" | "--unset" | "--chdir") {
                        k += 2;
                    } else if w.starts_with('-') || is_assignment(w) {
                        k += 1;
                    } else {
                        break;
                    }
                }
            }
            "command" => {
                if matches!(words.get(k + 1).map(String::as_str), Some("-v" | "-V")) {
                    return if piped { None } else { Some(Action::Probe) };
                }
                k = skip_flags(words, k + 1, &[]);
            }
            "xargs" => {
                let k = skip_flags(
                    words,
                    k + 1,
                    &["-I", "-n", "-P", "-L", "-l", "-s", "-d", "-E", "-a", "--max-args", "--max-procs", "--delimiter"],
                );
                if k >= words.len() {
                    return if piped { None } else { Some(Action::Other) };
                }
                return verb_action(&words[k..], None, false, depth);
            }
            _ if is_assignment(word) => k += 1,
            _ => break,
        }
    }
    let head = words[k].as_str();
    let args = &words[k + 1..];
    let verb = basename(head).to_lowercase();
    let action = match verb.as_str() {
        "cd" | "pushd" | "popd" | "export" | "set" | "unset" | "source" | "." | "alias" | "unalias" | "shopt"
        | "ulimit" | "umask" | "true" | "false" | ":" | "wait" | "trap" | "local" | "declare" | "typeset"
        | "readonly" | "exit" | "return" | "sleep" | "clear" | "hash" | "read" | "history" | "break" | "continue"
        | "shift" => return None,
        "eval" => return command_action(&args.join(" "), depth + 1),
        "echo" | "printf" => Action::Other,
        "git" | "gh" => Action::Git,
        "sed" => {
            if has_flag_letter(args, 'i', "") || args.iter().any(|a| a.starts_with("--in-place")) {
                Action::Write
            } else {
                Action::Read
            }
        }
        "perl" | "ruby" => {
            if has_flag_letter(args, 'i', "MmIeExlCdDF0") {
                Action::Write
            } else {
                Action::Execute
            }
        }
        "node" | "nodejs" | "deno" | "bun" => match inline_script(args, &["-e", "--eval", "-p", "--print"]) {
            Some(script) if node_writes(script) => Action::Write,
            _ => Action::Execute,
        },
        v if v.starts_with("python") || v == "pypy" || v == "pypy3" => python_action(args, stdin_text),
        "bash" | "sh" | "zsh" | "dash" | "ksh" => match shell_input(head, args) {
            ShellInput::Script(script) => return command_action(script, depth + 1),
            ShellInput::Stdin => match stdin_text {
                Some(body) => return command_action(body, depth + 1),
                None => Action::Execute,
            },
            ShellInput::File | ShellInput::NotShell => Action::Execute,
        },
        "find" => find_action(args, depth),
        "tee" => {
            if args.iter().any(|a| !a.starts_with('-') && !a.starts_with("/dev/")) {
                Action::Write
            } else {
                return None;
            }
        }
        "cat" if stdin_text.is_some() && args.iter().all(|a| a.starts_with('-')) => Action::Other,
        v if READ_VERBS.contains(&v) => Action::Read,
        v if PROBE_VERBS.contains(&v) => Action::Probe,
        v if WRITE_VERBS.contains(&v) => Action::Write,
        v if EXECUTE_VERBS.contains(&v) || v.starts_with("pip") => Action::Execute,
        v if head.contains('/') || v.ends_with(".sh") || v.ends_with(".py") => Action::Execute,
        _ => Action::Other,
    };
    if piped && matches!(action, Action::Read | Action::Probe) {
        return None;
    }
    Some(action)
}

#[rustfmt::skip]
const READ_VERBS: &[&str] = &[
    "cat", "tac", "head", "tail", "less", "more", "most", "nl", "wc", "bat", "batcat", "view", "od", "xxd",
    "hexdump", "strings", "diff", "cmp", "colordiff", "jq", "yq", "awk", "gawk", "mawk", "cut", "sort", "uniq",
    "column", "tr", "fold", "fmt", "paste", "rev", "expand", "zcat", "zless", "bzcat", "xzcat",
];
#[rustfmt::skip]
const PROBE_VERBS: &[&str] = &[
    "ls", "ll", "la", "dir", "vdir", "exa", "eza", "lsd", "find", "fd", "fdfind", "grep", "egrep", "fgrep",
    "zgrep", "rg", "ag", "ack", "ack-grep", "ast-grep", "tree", "locate", "mlocate", "plocate", "which",
    "whereis", "type", "file", "stat", "du", "df", "pwd", "realpath", "readlink", "basename", "dirname", "test",
    "[", "[[",
];
#[rustfmt::skip]
const WRITE_VERBS: &[&str] = &[
    "patch", "apply_patch", "applypatch", "mv", "cp", "rm", "rmdir", "mkdir", "touch", "ln", "chmod", "chown",
    "chgrp", "truncate", "install", "dd", "shred", "unlink", "rsync", "ed", "ex", "sponge", "dos2unix",
];
#[rustfmt::skip]
const EXECUTE_VERBS: &[&str] = &[
    "pytest", "py.test", "pytest-3", "uv", "uvx", "poetry", "pipenv", "conda", "mamba", "tox", "nox",
    "coverage", "nosetests", "mypy", "pyright", "ruff", "flake8", "pylint", "black", "isort", "bandit", "npm",
    "npx", "yarn", "pnpm", "pnpx", "bunx", "ts-node", "tsx", "tsc", "jest", "vitest", "mocha", "eslint",
    "prettier", "cargo", "rustc", "rustup", "go", "gofmt", "golangci-lint", "make", "gmake", "cmake", "ctest",
    "ninja", "meson", "bazel", "bazelisk", "buck", "mvn", "mvnw", "gradle", "gradlew", "ant", "sbt", "java",
    "javac", "kotlin", "kotlinc", "scala", "dotnet", "bundle", "rake", "rspec", "rails", "rubocop", "php",
    "phpunit", "composer", "swift", "swiftc", "xcodebuild", "gcc", "g++", "cc", "c++", "clang", "clang++",
    "mix", "elixir", "erl", "iex", "ghc", "cabal", "stack", "dune", "opam", "ocaml", "zig", "lua", "luajit",
    "julia", "rscript", "docker", "podman", "docker-compose", "shellcheck", "hadolint", "valgrind", "gdb",
    "lldb", "just", "nix",
];

/// Whether a short-flag cluster (`-pi`, `-i.bak`, `-ni`) contains `letter` before any flag in
/// `stops`, which takes the rest of its word as a value.
fn has_flag_letter(args: &[String], letter: char, stops: &str) -> bool {
    args.iter().any(|arg| {
        let Some(flags) = arg.strip_prefix('-') else { return false };
        if flags.starts_with('-') {
            return false;
        }
        for c in flags.chars() {
            if c == letter {
                return true;
            }
            if stops.contains(c) {
                return false;
            }
        }
        false
    })
}

/// The argument after the first of `flags`.
fn inline_script<'a>(args: &'a [String], flags: &[&str]) -> Option<&'a str> {
    let position = args.iter().position(|a| flags.contains(&a.as_str()))?;
    args.get(position + 1).map(String::as_str)
}

fn python_action(args: &[String], stdin_text: Option<&str>) -> Action {
    let mut code = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        match arg.as_str() {
            "-c" => {
                code = iter.next().map(String::as_str);
                break;
            }
            "-m" => return Action::Execute,
            "-W" | "-X" => {
                iter.next();
            }
            "-" => {
                code = stdin_text;
                break;
            }
            a if a.starts_with('-') => {}
            _ => return Action::Execute,
        }
    }
    let code = code.or(stdin_text).unwrap_or("");
    if python_writes(code) {
        Action::Write
    } else {
        Action::Execute
    }
}

/// Whether Python code writes files: `open(…, 'w'|'a'|'x'|'+')`, `.write_text(`, `os.remove(`…
fn python_writes(code: &str) -> bool {
    const WRITERS: &[&str] = &[
        "write_text(",
        "write_bytes(",
        "os.remove(",
        "os.unlink(",
        "os.rename(",
        "os.replace(",
        "shutil.move(",
        "shutil.copy",
        "shutil.rmtree(",
        ".unlink(",
    ];
    if WRITERS.iter().any(|w| code.contains(w)) {
        return true;
    }
    code.match_indices("open(").any(|(at, _)| {
        let call = &code[at + "open(".len()..];
        let call = &call[..call.find(')').unwrap_or(call.len())];
        // `open(path, mode)`: the mode follows the first comma; `Path(…).open(mode)`: it comes first.
        let method = code[..at].ends_with('.');
        let modes = if method { call } else { call.split_once(',').map_or("", |(_, rest)| rest) };
        quoted_literals(modes).any(|literal| {
            !literal.is_empty()
                && literal.chars().all(|c| "rwabxt+U".contains(c))
                && literal.chars().any(|c| "wax+".contains(c))
        })
    })
}

fn quoted_literals(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let start = rest.find(['\'', '"'])?;
        let quote = rest[start..].chars().next()?;
        let body = &rest[start + 1..];
        let end = body.find(quote)?;
        rest = &body[end + 1..];
        Some(&body[..end])
    })
}

fn node_writes(script: &str) -> bool {
    ["writeFile", "appendFile", "unlinkSync", "rmSync", "renameSync", "copyFileSync", "mkdirSync"]
        .iter()
        .any(|w| script.contains(w))
}

/// `find` probes, unless it deletes (`-delete`) or runs a command (`-exec CMD {} \;`).
fn find_action(args: &[String], depth: usize) -> Action {
    let mut action = Action::Probe;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "-delete" => action = Action::Write,
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end = args[i + 1..].iter().position(|a| a == ";" || a == "+").map_or(args.len(), |n| i + 1 + n);
                if let Some(inner) = verb_action(&args[i + 1..end], None, false, depth + 1) {
                    if inner.significance() > action.significance() {
                        action = inner;
                    }
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    action
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use Action::*;

    #[test]
    fn command_table() {
        let table: &[(&str, Action)] = &[
            ("cd repo && pytest -q", Execute),
            ("git diff HEAD~1 | head", Git),
            ("grep -rn foo src | wc -l", Probe),
            ("cat src/a.py", Read),
            ("sed -i 's/a/b/' f", Write),
            ("FOO=1 timeout 60 npm test", Execute),
            ("sed -n '1,80p' src/lib.rs", Read),
            ("nl -ba src/main.rs | sed -n '100,160p'", Read),
            ("ls -la", Probe),
            ("find . -name '*.py' -not -path './node_modules/*'", Probe),
            ("find . -name '*.pyc' -delete", Write),
            ("find . -name '*.py' -exec grep -l foo {} \\;", Probe),
            ("find src -type f | xargs wc -l", Read),
            ("rg -n \"fn main\" --type rust", Probe),
            ("ls src | grep test", Probe),
            ("cat a.py | grep -n def", Read),
            ("head -50 a.py; tail -20 b.py", Read),
            ("wc -l src/*.rs", Read),
            ("tree -L 2", Probe),
            ("cat > review.md <<'EOF'\n# Review\n- uses `a && b | c; d`\nEOF", Write),
            ("cat <<'EOF' > review.md\n## Findings\n1. x > y\nEOF", Write),
            ("cat <<'EOF'\nsummary text\nEOF", Other),
            ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", Other),
            ("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat review.md", Read),
            ("echo hi > notes.txt", Write),
            ("printf '%s\\n' a >> log.txt", Write),
            ("python -m pytest tests/ -x 2>&1 | tail -n 30", Execute),
            ("pytest -q 2>/dev/null", Execute),
            ("python -c \"print(1)\"", Execute),
            ("python3 -c \"open('f.txt','w').write('x')\"", Write),
            ("python3 - <<'EOF'\nfrom pathlib import Path\nPath('a').write_text('b')\nEOF", Write),
            ("python3 - <<'EOF'\nprint(open('a', 'r').read())\nEOF", Execute),
            ("perl -pi -e 's/foo/bar/' a.txt", Write),
            ("perl -ne 'print if /x/' a.txt", Execute),
            ("git log --oneline -5 && cat README.md", Git),
            ("git status; git diff --stat", Git),
            ("sudo -u app make test", Execute),
            ("time cargo build --release", Execute),
            ("nohup node server.js &", Execute),
            ("mkdir -p out && cp a b", Write),
            ("rm -rf build", Write),
            ("apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a.py\n-x\n+y\n*** End Patch\nEOF", Write),
            ("bash -lc 'cd repo && ls'", Probe),
            ("bash scripts/test.sh", Execute),
            ("./run_tests.sh --fast", Execute),
            ("npx tsc --noEmit", Execute),
            ("go test ./...", Execute),
            ("cargo test -p core | tee out.log", Write),
            ("which python && python --version", Execute),
            ("cd /repo", Other),
            ("export PATH=$PATH:/x && go vet ./...", Execute),
            ("for f in src/*.py; do wc -l \"$f\"; done", Read),
            ("if [ -f setup.py ]; then cat setup.py; fi", Read),
            ("git diff main...HEAD -- src/ | grep '^+' | head -100", Git),
            ("env -u X LANG=C sort names.txt", Read),
            ("command -v rg", Probe),
            ("bash <<'EOF'\nnpm test\nEOF", Execute),
            ("uv run pytest -k slow", Execute),
            ("", Other),
        ];
        let failures: Vec<String> = table
            .iter()
            .filter(|(command, expected)| classify_command(command) != *expected)
            .map(|(command, expected)| {
                format!("{command:?}: expected {expected:?}, got {:?}", classify_command(command))
            })
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn shell_tools_by_command() {
        let codex = classify_tool("shell", &json!({"command": ["bash", "-lc", "rg -n TODO"], "workdir": "/repo"}));
        assert_eq!(codex, (Probe, Some("rg -n TODO".to_string())));
        let argv = classify_tool("local_shell", &json!({"type": "exec", "command": ["git", "log", "-p", "a b"]}));
        assert_eq!(argv, (Git, Some("git log -p 'a b'".to_string())));
        let claude = classify_tool("Bash", &json!({"command": "cd /repo && npm test", "description": "tests"}));
        assert_eq!(claude, (Execute, Some("cd /repo && npm test".to_string())));
        let exec = classify_tool("exec_command", &json!({"cmd": "sh -c \"cat a.txt\""}));
        assert_eq!(exec, (Read, Some("cat a.txt".to_string())));
        let nested = classify_tool("container.exec", &json!({"cmd": ["sh", "-c", "bash -lc 'ls -la'"]}));
        assert_eq!(nested, (Probe, Some("ls -la".to_string())));
        let shell_call = classify_tool("shell", &json!({"commands": ["ls", "cat a"]}));
        assert_eq!(shell_call, (Read, Some("ls\ncat a".to_string())));
        assert_eq!(classify_tool("bash", &json!("pytest")), (Execute, Some("pytest".to_string())));
        assert_eq!(classify_tool("run_shell_command", &json!({})), (Other, None));
    }

    #[test]
    fn tools_by_name() {
        let none = json!({});
        let table: &[(&str, Action)] = &[
            ("Read", Read),
            ("read_file", Read),
            ("view", Read),
            ("Glob", Probe),
            ("Grep", Probe),
            ("LS", Probe),
            ("list_dir", Probe),
            ("search_file_content", Probe),
            ("Write", Write),
            ("Edit", Write),
            ("MultiEdit", Write),
            ("NotebookEdit", Write),
            ("apply_patch", Write),
            ("str_replace", Write),
            ("create", Write),
            ("mcp__fs__read_file", Read),
            ("functions.apply_patch", Write),
            ("git_diff", Git),
            ("mcp__git__git_log", Git),
            ("GitStatus", Git),
            ("TodoWrite", Other),
            ("WebFetch", Other),
            ("update_plan", Other),
            ("github_get_issue", Other),
        ];
        for (name, expected) in table {
            assert_eq!(classify_tool(name, &none), (*expected, None), "{name}");
        }
        assert_eq!(classify_tool("str_replace_editor", &json!({"command": "view", "path": "a"})).0, Read);
        assert_eq!(classify_tool("str_replace_based_edit_tool", &json!({"command": "create"})).0, Write);
    }

    #[test]
    fn python_write_detection() {
        assert!(python_writes("open(p, 'w')"));
        assert!(python_writes("Path('x').open('a')"));
        assert!(python_writes("open('f', mode=\"wb\")"));
        assert!(!python_writes("open('a', 'r').read()"));
        assert!(!python_writes("open('w')"));
        assert!(!python_writes("print('w')"));
    }
}
