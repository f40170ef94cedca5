//! A small, forgiving POSIX-shell lexer: enough to split a command line into its simple
//! commands and see each one's words, redirections and here-document input.
//!
//! It never fails: unbalanced quotes run to the end of the text, an unterminated here-document
//! takes the rest of the text as its body. Expansions (`$(...)`, backticks, `<(...)`) are kept
//! inside the word they appear in and are not analysed.

/// One simple command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Segment {
    /// The words with quotes and escapes removed.
    pub words: Vec<String>,
    pub redirects: Vec<Redirect>,
    /// Standard input given as text: a here-document's body or a here-string.
    pub stdin_text: Option<String>,
    /// Standard input comes from the previous command through `|`.
    pub piped: bool,
}

impl Segment {
    fn is_empty(&self) -> bool {
        self.words.is_empty() && self.redirects.is_empty() && self.stdin_text.is_none()
    }
}

/// A redirection other than a here-document or here-string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    pub fd: Option<u32>,
    /// `>`, `>>`, `>|`, `>&`, `&>`, `&>>`, `<`, `<&`, `<>`.
    pub op: &'static str,
    pub target: String,
}

impl Redirect {
    /// Whether the redirection writes a file: output into a path other than a device
    /// (`/dev/null`, `/dev/stderr`…) and not a descriptor duplication (`2>&1`, `>&-`).
    pub fn writes_file(&self) -> bool {
        let device = self.target.starts_with("/dev/");
        match self.op {
            ">" | ">>" | ">|" | "&>" | "&>>" | "<>" => !device && !self.target.is_empty(),
            ">&" => !device && self.target != "-" && !self.target.chars().all(|c| c.is_ascii_digit()),
            _ => false,
        }
    }
}

/// Splits `command` into simple commands on `&&`, `||`, `;`, `|`, `&`, newlines and subshell
/// parentheses, outside quotes; a here-document body belongs to the command that opened it.
pub(crate) fn split(command: &str) -> Vec<Segment> {
    let mut lexer = Lexer::new(command);
    lexer.run();
    lexer.segments
}

struct PendingHeredoc {
    delimiter: String,
    strip_tabs: bool,
    /// The index the command that opened it has (or will have) in `segments`.
    segment: usize,
}

struct Lexer {
    chars: Vec<char>,
    i: usize,
    segments: Vec<Segment>,
    current: Segment,
    word: String,
    word_started: bool,
    word_quoted: bool,
    pending_redirect: Option<(Option<u32>, &'static str)>,
    pending_heredocs: Vec<PendingHeredoc>,
}

impl Lexer {
    fn new(text: &str) -> Lexer {
        Lexer {
            chars: text.chars().collect(),
            i: 0,
            segments: Vec::new(),
            current: Segment::default(),
            word: String::new(),
            word_started: false,
            word_quoted: false,
            pending_redirect: None,
            pending_heredocs: Vec::new(),
        }
    }

    fn peek(&self, offset: usize) -> Option<char> {
        self.chars.get(self.i + offset).copied()
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '\'' => {
                    self.word_started = true;
                    self.word_quoted = true;
                    self.i += 1;
                    while let Some(ch) = self.peek(0) {
                        self.i += 1;
                        if ch == '\'' {
                            break;
                        }
                        self.word.push(ch);
                    }
                }
                '"' => {
                    self.word_started = true;
                    self.word_quoted = true;
                    self.i += 1;
                    while let Some(ch) = self.peek(0) {
                        if ch == '"' {
                            self.i += 1;
                            break;
                        }
                        if ch == '\\' {
                            if let Some(next @ ('"' | '\\' | '$' | '`' | '\n')) = self.peek(1) {
                                if next != '\n' {
                                    self.word.push(next);
                                }
                                self.i += 2;
                                continue;
                            }
                        }
                        self.word.push(ch);
                        self.i += 1;
                    }
                }
                '\\' => {
                    match self.peek(1) {
                        Some('\n') => {}
                        Some(next) => {
                            self.word.push(next);
                            self.word_started = true;
                            self.word_quoted = true;
                        }
                        None => {}
                    }
                    self.i += 2;
                }
                '#' if !self.word_started => {
                    while self.peek(0).is_some_and(|ch| ch != '\n') {
                        self.i += 1;
                    }
                }
                ' ' | '\t' | '\r' => {
                    self.finish_word();
                    self.i += 1;
                }
                '\n' => self.newline(),
                ';' => {
                    self.finish_segment(false);
                    self.i += 1;
                }
                '&' => match self.peek(1) {
                    Some('&') => {
                        self.finish_segment(false);
                        self.i += 2;
                    }
                    Some('>') => {
                        self.finish_word();
                        let op = if self.peek(2) == Some('>') { "&>>" } else { "&>" };
                        self.i += op.len();
                        self.pending_redirect = Some((None, op));
                    }
                    _ => {
                        self.finish_segment(false);
                        self.i += 1;
                    }
                },
                '|' => match self.peek(1) {
                    Some('|') => {
                        self.finish_segment(false);
                        self.i += 2;
                    }
                    Some('&') => {
                        self.finish_segment(true);
                        self.i += 2;
                    }
                    _ => {
                        self.finish_segment(true);
                        self.i += 1;
                    }
                },
                '(' if self.word.ends_with('$') || self.word.ends_with('=') => self.balanced_into_word(),
                '(' | ')' => {
                    self.finish_segment(false);
                    self.i += 1;
                }
                '`' => {
                    self.word_started = true;
                    self.word.push('`');
                    self.i += 1;
                    while let Some(ch) = self.peek(0) {
                        self.word.push(ch);
                        self.i += 1;
                        if ch == '`' {
                            break;
                        }
                    }
                }
                '>' | '<' => self.redirect(c),
                _ => {
                    self.word.push(c);
                    self.word_started = true;
                    self.i += 1;
                }
            }
        }
        self.finish_segment(false);
    }

    /// Appends a parenthesised expansion (`$(...)`, `<(...)`, `a=(...)`) to the current word.
    fn balanced_into_word(&mut self) {
        self.word_started = true;
        let mut depth = 0usize;
        let mut quote: Option<char> = None;
        while let Some(ch) = self.peek(0) {
            self.word.push(ch);
            self.i += 1;
            match (quote, ch) {
                (Some(q), _) if ch == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(ch),
                (None, '(') => depth += 1,
                (None, ')') => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
    }

    fn redirect(&mut self, c: char) {
        let fd = if self.word_started
            && !self.word_quoted
            && !self.word.is_empty()
            && self.word.chars().all(|ch| ch.is_ascii_digit())
        {
            let fd = self.word.parse().ok();
            self.word.clear();
            self.word_started = false;
            fd
        } else {
            self.finish_word();
            None
        };
        if c == '<' && self.peek(1) == Some('(') {
            self.word.push('<');
            self.i += 1;
            self.balanced_into_word();
            return;
        }
        let op = match (c, self.peek(1), self.peek(2)) {
            ('>', Some('>'), _) => ">>",
            ('>', Some('&'), _) => ">&",
            ('>', Some('|'), _) => ">|",
            ('>', _, _) => ">",
            ('<', Some('<'), Some('<')) => "<<<",
            ('<', Some('<'), Some('-')) => "<<-",
            ('<', Some('<'), _) => "<<",
            ('<', Some('&'), _) => "<&",
            ('<', Some('>'), _) => "<>",
            _ => "<",
        };
        self.i += op.len();
        self.pending_redirect = Some((fd, op));
    }

    fn finish_word(&mut self) {
        if !self.word_started {
            return;
        }
        let word = std::mem::take(&mut self.word);
        self.word_started = false;
        self.word_quoted = false;
        match self.pending_redirect.take() {
            Some((_, op @ ("<<" | "<<-"))) => {
                self.pending_heredocs.push(PendingHeredoc {
                    delimiter: word,
                    strip_tabs: op == "<<-",
                    segment: self.segments.len(),
                });
                self.current.stdin_text.get_or_insert_with(String::new);
            }
            Some((_, "<<<")) => self.current.stdin_text = Some(word),
            Some((fd, op)) => self.current.redirects.push(Redirect { fd, op, target: word }),
            None => self.current.words.push(word),
        }
    }

    fn finish_segment(&mut self, piped_next: bool) {
        self.finish_word();
        self.pending_redirect = None;
        let segment = std::mem::take(&mut self.current);
        if !segment.is_empty() {
            self.segments.push(segment);
        }
        self.current.piped = piped_next;
    }

    /// Ends the line: reads the bodies of the here-documents opened on it, then ends the command.
    fn newline(&mut self) {
        self.finish_word();
        let mut pos = self.i + 1;
        for heredoc in std::mem::take(&mut self.pending_heredocs) {
            let mut body = String::new();
            while pos < self.chars.len() {
                let end = self.chars[pos..].iter().position(|&ch| ch == '\n').map_or(self.chars.len(), |n| pos + n);
                let line: String = self.chars[pos..end].iter().collect();
                pos = (end + 1).min(self.chars.len());
                let mut candidate = line.trim_end_matches('\r');
                if heredoc.strip_tabs {
                    candidate = candidate.trim_start_matches('\t');
                }
                if candidate.trim() == heredoc.delimiter {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            let target = if heredoc.segment < self.segments.len() {
                &mut self.segments[heredoc.segment]
            } else {
                &mut self.current
            };
            target.stdin_text = Some(body);
        }
        self.i = pos;
        self.finish_segment(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(command: &str) -> Vec<Vec<String>> {
        split(command).into_iter().map(|s| s.words).collect()
    }

    #[test]
    fn splits_on_operators_outside_quotes() {
        assert_eq!(
            words("cd repo && pytest -q 'a && b' \"c; d\" || echo x | wc -l; ls &"),
            vec![
                vec!["cd", "repo"],
                vec!["pytest", "-q", "a && b", "c; d"],
                vec!["echo", "x"],
                vec!["wc", "-l"],
                vec!["ls"],
            ]
        );
        let segments = split("a | b || c");
        assert_eq!(segments.iter().map(|s| s.piped).collect::<Vec<_>>(), vec![false, true, false]);
    }

    #[test]
    fn redirects_and_descriptors() {
        let segments = split("pytest 2>&1 >out.log 2>/dev/null");
        assert_eq!(segments[0].words, vec!["pytest"]);
        let writes: Vec<bool> = segments[0].redirects.iter().map(Redirect::writes_file).collect();
        assert_eq!(writes, vec![false, true, false]);
        assert!(split("echo hi>f")[0].redirects[0].writes_file());
        assert!(!split("wc -l < f")[0].redirects[0].writes_file());
    }

    #[test]
    fn heredoc_body_is_one_segment() {
        let segments = split("cat > review.md <<'EOF'\n# Review\n- a && b | c; d\nEOF\necho done");
        assert_eq!(segments.len(), 2);
        assert_eq!(segments[0].words, vec!["cat"]);
        assert_eq!(segments[0].redirects[0].target, "review.md");
        assert_eq!(segments[0].stdin_text.as_deref(), Some("# Review\n- a && b | c; d\n"));
        assert_eq!(segments[1].words, vec!["echo", "done"]);

        let piped = split("cat <<EOF | grep x\nbody\nEOF\n");
        assert_eq!(piped.len(), 2);
        assert_eq!(piped[0].stdin_text.as_deref(), Some("body\n"));
        assert!(piped[1].piped);

        let unterminated = split("cat <<EOF\nno end");
        assert_eq!(unterminated[0].stdin_text.as_deref(), Some("no end\n"));
    }

    #[test]
    fn expansions_stay_in_words_and_comments_are_dropped() {
        assert_eq!(
            words("echo $(git rev-parse HEAD) `date` # cat x"),
            vec![vec!["echo", "$(git rev-parse HEAD)", "`date`"]]
        );
        assert_eq!(words("(cd a && make)"), vec![vec!["cd", "a"], vec!["make"]]);
        assert_eq!(words("diff <(git show a) b"), vec![vec!["diff", "<(git show a)", "b"]]);
        assert_eq!(words("echo 'unterminated"), vec![vec!["echo", "unterminated"]]);
        assert_eq!(words("ls \\\n  -la"), vec![vec!["ls", "-la"]]);
    }
}
