//! Reading one plan's markdown: which lines are tasks, open or done, outside fenced code.

/// Task lines found in one plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskCount {
    /// `- [ ]` lines.
    pub open: usize,
    /// `- [x]`, `- [X]` and `- [~]` lines.
    pub done: usize,
}

/// Count the task lines of a plan's text; see the module docs for what counts.
pub fn count_tasks(text: &str) -> TaskCount {
    let mut count = TaskCount::default();
    each_task(text, |mark, _| match mark {
        TaskMark::Open => count.open += 1,
        TaskMark::Done => count.done += 1,
    });
    count
}

/// One task line of a plan: its text after the checkbox, and whether it is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub text: String,
    pub done: bool,
}

/// The task lines of a plan's text, in order, by the rules [`count_tasks`] counts them.
pub fn tasks(text: &str) -> Vec<Task> {
    let mut out = Vec::new();
    each_task(text, |mark, rest| {
        out.push(Task {
            text: rest.trim().to_string(),
            done: matches!(mark, TaskMark::Done),
        })
    });
    out
}

/// Call `f` with each task line's mark and the text after its checkbox.
fn each_task(text: &str, mut f: impl FnMut(TaskMark, &str)) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut fence: Option<Fence> = None;
    for line in text.lines() {
        if let Some(open) = fence {
            if open.is_closed_by(line) {
                fence = None;
            }
            continue;
        }
        if let Some(open) = Fence::opened_by(line) {
            fence = Some(open);
            continue;
        }
        if let Some((mark, rest)) = task_mark(line) {
            f(mark, rest);
        }
    }
}

enum TaskMark {
    Open,
    Done,
}

fn task_mark(line: &str) -> Option<(TaskMark, &str)> {
    let rest = line.trim_start_matches([' ', '\t']).strip_prefix("- [")?;
    let mut chars = rest.chars();
    let mark = chars.next()?;
    let after = chars.as_str().strip_prefix(']')?;
    if !(after.is_empty() || after.starts_with([' ', '\t'])) {
        return None;
    }
    match mark {
        ' ' => Some((TaskMark::Open, after)),
        'x' | 'X' | '~' => Some((TaskMark::Done, after)),
        _ => None,
    }
}

#[derive(Clone, Copy)]
struct Fence {
    ch: char,
    len: usize,
}

impl Fence {
    fn opened_by(line: &str) -> Option<Fence> {
        let rest = line.trim_start_matches([' ', '\t']);
        let ch = rest.chars().next().filter(|c| matches!(c, '`' | '~'))?;
        let len = rest.chars().take_while(|&c| c == ch).count();
        // CommonMark: a backtick fence's info string cannot contain a backtick (that would be
        // inline code such as ```` ```x``` ````).
        let info = &rest[len * ch.len_utf8()..];
        (len >= 3 && !(ch == '`' && info.contains('`'))).then_some(Fence { ch, len })
    }

    fn is_closed_by(self, line: &str) -> bool {
        let rest = line.trim_start_matches([' ', '\t']);
        let len = rest.chars().take_while(|&c| c == self.ch).count();
        len >= self.len && rest[len * self.ch.len_utf8()..].trim().is_empty()
    }
}
