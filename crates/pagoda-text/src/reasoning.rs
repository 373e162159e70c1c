//! Splits a reasoning model's output into its thinking and its answer, as the text streams in:
//! `<think>...</think>` (Qwen3, DeepSeek-R1 and their descendants).
//!
//! Qwen3 writes the opening tag itself, and only when thinking is on; DeepSeek-R1's template
//! opens it in the prompt, so its output starts inside the thinking. Text that could be the
//! start of a tag is held back until the next piece tells.

/// Which model family's reasoning convention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasoningFormat {
    Qwen3,
    DeepSeekR1,
}

impl ReasoningFormat {
    pub fn parse(name: &str) -> Option<ReasoningFormat> {
        match name {
            "qwen3" => Some(ReasoningFormat::Qwen3),
            "deepseek_r1" | "deepseek-r1" => Some(ReasoningFormat::DeepSeekR1),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ReasoningFormat::Qwen3 => "qwen3",
            ReasoningFormat::DeepSeekR1 => "deepseek_r1",
        }
    }
}

pub const THINK_START: &str = "<think>";
pub const THINK_END: &str = "</think>";

/// How far back from the end of a rendered prompt a template's own thinking tags sit
/// (`<think>\n` after DeepSeek-R1's generation prompt, `<think>\n\n</think>\n\n` after
/// Qwen3's with thinking off). Tags further back are in messages, and say nothing about
/// where the output starts.
const PROMPT_TAIL: usize = 32;

fn tail(prompt: &str) -> &str {
    let start = prompt.len().saturating_sub(PROMPT_TAIL);
    let start = (start..=prompt.len())
        .find(|&i| prompt.is_char_boundary(i))
        .unwrap_or(prompt.len());
    &prompt[start..]
}

/// Whether a rendered prompt leaves the model inside an opened `<think>`.
pub fn prompt_opens_thinking(prompt: &str) -> bool {
    let tail = tail(prompt);
    matches!(
        (tail.rfind(THINK_START), tail.rfind(THINK_END)),
        (Some(open), close) if close.is_none_or(|c| c < open)
    )
}

/// Whether a rendered prompt already closed the thinking (Qwen3 with `enable_thinking:
/// false` renders an empty `<think></think>` after the generation prompt).
pub fn prompt_closes_thinking(prompt: &str) -> bool {
    let tail = tail(prompt);
    matches!(
        (tail.rfind(THINK_START), tail.rfind(THINK_END)),
        (open, Some(close)) if open.is_none_or(|o| o < close)
    )
}

/// Pieces of one output, split.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    pub reasoning: String,
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Nothing but white space yet, and the output may open a `<think>`.
    Start,
    Reasoning {
        at_start: bool,
    },
    Content {
        at_start: bool,
    },
}

#[derive(Debug, Clone)]
pub struct ReasoningSplitter {
    state: State,
    held: String,
}

impl ReasoningSplitter {
    /// `prompt` is the rendered prompt, which says whether the output starts inside the
    /// thinking.
    pub fn new(format: ReasoningFormat, prompt: &str) -> ReasoningSplitter {
        let state = if prompt_closes_thinking(prompt) {
            State::Content { at_start: true }
        } else if format == ReasoningFormat::DeepSeekR1 || prompt_opens_thinking(prompt) {
            State::Reasoning { at_start: true }
        } else {
            State::Start
        };
        ReasoningSplitter {
            state,
            held: String::new(),
        }
    }

    /// Whether the answer has begun (constraints on the answer apply from here).
    pub fn in_content(&self) -> bool {
        matches!(self.state, State::Content { .. })
    }

    pub fn push(&mut self, text: &str) -> Split {
        self.held.push_str(text);
        let mut out = Split::default();
        loop {
            match self.state {
                State::Start => {
                    let trimmed = self.held.trim_start();
                    if let Some(rest) = trimmed.strip_prefix(THINK_START) {
                        self.held = rest.to_string();
                        self.state = State::Reasoning { at_start: true };
                    } else if trimmed.is_empty() || THINK_START.starts_with(trimmed) {
                        return out;
                    } else {
                        self.state = State::Content { at_start: false };
                    }
                }
                State::Reasoning { at_start } => {
                    if at_start {
                        // DeepSeek-R1 may repeat the opening tag its prompt already wrote.
                        let trimmed = self.held.trim_start();
                        if let Some(rest) = trimmed.strip_prefix(THINK_START) {
                            self.held = rest.to_string();
                        } else if THINK_START.starts_with(trimmed) && !trimmed.is_empty() {
                            return out;
                        }
                    }
                    self.state = State::Reasoning { at_start: false };
                    if let Some(end) = self.held.find(THINK_END) {
                        out.reasoning.push_str(&self.held[..end]);
                        self.held = self.held[end + THINK_END.len()..].to_string();
                        self.state = State::Content { at_start: true };
                        continue;
                    }
                    let keep = partial_suffix(&self.held, THINK_END);
                    let cut = self.held.len() - keep;
                    out.reasoning.push_str(&self.held[..cut]);
                    self.held.drain(..cut);
                    return out;
                }
                State::Content { at_start } => {
                    if at_start {
                        // The blank lines between the thinking and the answer belong to neither.
                        let trimmed = self.held.trim_start_matches(['\n', '\r', ' ']);
                        if trimmed.is_empty() {
                            self.held.clear();
                            return out;
                        }
                        self.held = trimmed.to_string();
                        self.state = State::Content { at_start: false };
                    }
                    out.content.push_str(&self.held);
                    self.held.clear();
                    return out;
                }
            }
        }
    }

    /// The end of the output: whatever was held back goes where it was heading.
    pub fn finish(&mut self) -> Split {
        let held = std::mem::take(&mut self.held);
        match self.state {
            State::Reasoning { .. } => Split {
                reasoning: held,
                content: String::new(),
            },
            State::Start | State::Content { .. } => Split {
                reasoning: String::new(),
                content: if matches!(self.state, State::Content { at_start: true }) {
                    held.trim_start().to_string()
                } else {
                    held
                },
            },
        }
    }
}

/// Length of the longest end of `text` that `tag` starts with (and is shorter than `tag`).
pub fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len().min(text.len() + 1))
        .rev()
        .find(|&n| {
            text.is_char_boundary(text.len() - n) && tag.starts_with(&text[text.len() - n..])
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits `output` fed in pieces of every size; all must agree with the one-piece split.
    fn split(format: ReasoningFormat, prompt: &str, output: &str) -> (String, String) {
        let whole = {
            let mut s = ReasoningSplitter::new(format, prompt);
            let a = s.push(output);
            let b = s.finish();
            (a.reasoning + &b.reasoning, a.content + &b.content)
        };
        for size in 1..6 {
            let mut s = ReasoningSplitter::new(format, prompt);
            let (mut r, mut c) = (String::new(), String::new());
            let chars: Vec<char> = output.chars().collect();
            for piece in chars.chunks(size) {
                let out = s.push(&piece.iter().collect::<String>());
                r += &out.reasoning;
                c += &out.content;
            }
            let out = s.finish();
            assert_eq!(
                (r + &out.reasoning, c + &out.content),
                whole,
                "pieces of {size}"
            );
        }
        whole
    }

    const QWEN_PROMPT: &str = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";

    #[test]
    fn qwen3_thinking_then_answer() {
        let out = split(
            ReasoningFormat::Qwen3,
            QWEN_PROMPT,
            "<think>\nLet me see: 2+2.\n</think>\n\nIt is 4.",
        );
        assert_eq!(out, ("\nLet me see: 2+2.\n".into(), "It is 4.".into()));
    }

    #[test]
    fn qwen3_without_thinking_is_all_answer() {
        assert_eq!(
            split(ReasoningFormat::Qwen3, QWEN_PROMPT, "Just <b>4</b>."),
            ("".into(), "Just <b>4</b>.".into())
        );
        let closed = format!("{QWEN_PROMPT}<think>\n\n</think>\n\n");
        assert_eq!(
            split(ReasoningFormat::Qwen3, &closed, "4"),
            ("".into(), "4".into())
        );
        // An output cut off while thinking is all thinking.
        assert_eq!(
            split(ReasoningFormat::Qwen3, QWEN_PROMPT, "<think>hmm, <thi"),
            ("hmm, <thi".into(), "".into())
        );
    }

    #[test]
    fn deepseek_r1_starts_inside_the_thinking() {
        let prompt = "<｜User｜>hi<｜Assistant｜><think>\n";
        assert_eq!(
            split(
                ReasoningFormat::DeepSeekR1,
                prompt,
                "ok so </thinking? no.</think>Answer"
            ),
            ("ok so </thinking? no.".into(), "Answer".into())
        );
        // With or without the prompt's tag, and with the tag repeated in the output.
        assert_eq!(
            split(ReasoningFormat::DeepSeekR1, "", "<think>x</think>y"),
            ("x".into(), "y".into())
        );
        assert_eq!(
            split(ReasoningFormat::DeepSeekR1, "", "never closed"),
            ("never closed".into(), "".into())
        );
    }

    #[test]
    fn only_the_prompts_tail_says_where_the_output_starts() {
        let user_wrote_tags = "<|im_start|>user\n<think>sneaky</think> or <think> open<|im_end|>\n<|im_start|>assistant\n";
        assert!(
            !prompt_opens_thinking(user_wrote_tags) && !prompt_closes_thinking(user_wrote_tags)
        );
        assert!(prompt_opens_thinking("...<｜Assistant｜><think>\n"));
        assert!(prompt_closes_thinking(
            "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        ));
    }

    #[test]
    fn partial_tags_are_held_only_while_they_could_be_tags() {
        assert_eq!(partial_suffix("abc</th", THINK_END), 4);
        assert_eq!(partial_suffix("abc</x", THINK_END), 0);
        assert_eq!(partial_suffix("é<", THINK_END), 1);
    }
}
