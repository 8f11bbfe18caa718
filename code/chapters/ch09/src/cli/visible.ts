import { HIDDEN_CHARACTER, hasHiddenCharacters } from "../core/hidden-characters.js";
import { CONFUSABLE_PROTOTYPES } from "./confusables.js";

/** Whether `oneLine` would show characters the terminal draws as nothing (or as reordered text). */
export { hasHiddenCharacters };

// C0 controls but tab and newline, DEL, and C1 controls: the escape sequences a terminal obeys.
// eslint-disable-next-line no-control-regex -- control characters are exactly what this replaces
const CONTROL = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/;
// A zero-width joiner between two pictographs only joins them into one emoji (👩‍💻): an answer keeps it.
// eslint-disable-next-line no-misleading-character-class -- the selector and skin tones follow a pictograph
const EMOJI_JOINER = /(?<=\p{Extended_Pictographic}[\ufe0f\u{1f3fb}-\u{1f3ff}]?)\u200d(?=\p{Extended_Pictographic})/uy;
// A text or emoji presentation selector right after an emoji (⚠️) only picks how that emoji is drawn: an answer
// keeps it. Any other variation selector is escaped, so none can carry bytes a reader does not see.
const EMOJI_SELECTOR = /(?<=\p{Emoji})[\ufe0e\ufe0f]/uy;

// Hidden characters (core/hidden-characters.ts): a terminal draws nothing for them, or reorders the text around
// them, so a command can display in another order, a path look like another, or a line carry what nobody sees.
const MULTI_LINE = new RegExp(`${CONTROL.source}|${HIDDEN_CHARACTER.source}`, "gu");
const ONE_LINE = new RegExp(`[\\t\\n]|${CONTROL.source}|${HIDDEN_CHARACTER.source}`, "gu");

/**
 * Text that came from the model (or a provider), made safe to print: control and hidden characters are
 * shown as `\u001b`-style escapes instead of being obeyed, so a reply cannot hide, reorder or rewrite what
 * the terminal shows the user, such as an approval question. Tabs and line breaks stay, and so do the joiners
 * and presentation selectors inside an emoji.
 */
export function visible(text: string): string {
  return text.replace(MULTI_LINE, (char, offset: number) => {
    EMOJI_JOINER.lastIndex = offset;
    EMOJI_SELECTOR.lastIndex = offset;
    return EMOJI_JOINER.test(text) || EMOJI_SELECTOR.test(text) ? char : escaped(char);
  });
}

/**
 * A value shown on one line (a tool name, an argument, an error): like `visible`, and tabs, line breaks and
 * every invisible character escaped too (`\t`, `\n`, `\u200b`), so it can neither start a line of its own
 * nor pass for another value.
 */
export function oneLine(text: string): string {
  return text.replace(ONE_LINE, escaped);
}

/**
 * How the CLI's own lines begin: the approval block, the audit record, progress, notices and failures. A line
 * of model text that begins like one of them (after any indentation) could pass for it.
 */
export const CLI_LINE_STARTS: readonly string[] = [
  // Chapter 6: a subagent's progress rows and its failure line.
  "子 Agent",
  "[Permission]",
  "[Hook]",
  // Chapter 8: files the runtime saved, and request history summaries.
  "[Artifact]",
  "[Compaction]",
  // Chapter 9: what memory selected, saved or could not do.
  "[Memory]",
  "工具调用需要批准",
  "原因:",
  "原因：",
  "参数:",
  "参数：",
  "注意:",
  "注意：",
  "命令:",
  "命令：",
  "命令 (第",
  "路径:",
  "路径：",
  "允许本次调用",
  "(还有",
  "参数太长",
  "→",
  "✓ ok",
  "✗",
  "无交互输入",
  "演示工作区",
  "运行失败",
  "警告:",
  "已中断",
  "配置错误",
  "模型:",
  "模型：",
  "意外错误",
];

/**
 * UTS #39's skeleton of `text` for the characters the CLI's own lines are made of: NFKC (full-width and other
 * compatible forms), then each character replaced by the one it is drawn like (Cyrillic `е` by `e`, `１` by `l`),
 * then NFD; and, as UTS #39 drops default-ignorable characters, every hidden character and all white space
 * dropped, so `子  Agent`, `子\tAgent`, `子\u3000Agent` and `子Agent` read as `子 Agent`. Two texts a reader cannot
 * tell apart have the same skeleton.
 */
export function skeleton(text: string): string {
  let out = "";
  for (const char of text.normalize("NFKC").normalize("NFD")) out += drawnAs(char) ?? char;
  return out.normalize("NFD").replace(NOT_IN_SKELETON, "");
}

/**
 * `skeleton` with each character looked up before NFKC as well, which UTS #39's own skeleton does (NFD, then the
 * table): NFKC turns some look-alikes into other letters (`ſ`, drawn like `f`, into `s`; `ϲ`, drawn like `c`, into
 * `σ`; `︰`, drawn like `:`, into `‥`), where no row of the table finds them. A text reads like a CLI line when
 * either skeleton does: NFKC first is still needed where the table maps a full-width form elsewhere (`［` to `(`).
 */
export function tableFirstSkeleton(text: string): string {
  let out = "";
  for (const char of text.normalize("NFD")) {
    const drawnLike = drawnAs(char);
    if (drawnLike !== undefined) out += drawnLike;
    else for (const folded of char.normalize("NFKC").normalize("NFD")) out += drawnAs(folded) ?? folded;
  }
  return out.normalize("NFD").replace(NOT_IN_SKELETON, "");
}

const drawnAs = (char: string): string | undefined => CONFUSABLE_PROTOTYPES.get(char) ?? DRAWN_ALIKE.get(char);

/**
 * What a skeleton leaves out: white space of any width or kind, and what draws nothing, the Braille blank among it
 * (no white space and not default-ignorable, yet drawn as an empty cell: `子⠀Agent` reads as `子 Agent`).
 */
const NOT_IN_SKELETON = new RegExp(`\\s|${HIDDEN_CHARACTER.source}|\\u2800`, "gu");

/** Marks confusables.txt does not list that a terminal draws like the CLI's own `✓`, `✗` and `→`. */
const DRAWN_ALIKE: ReadonlyMap<string, string> = new Map([
  ["\u2714", "\u2713"],
  ["\u2705", "\u2713"],
  ["\u2718", "\u2717"],
  ["\u2716", "\u2717"],
  ["\u274c", "\u2717"],
  ["\u2794", "\u2192"],
  ["\u27f6", "\u2192"],
  ["\u279c", "\u2192"],
  ["\u21d2", "\u2192"],
]);

const CLI_LINE_SKELETONS = CLI_LINE_STARTS.map(skeleton);

/** Whether `text` holds, anywhere, something a reader would take for the start of one of the CLI's own lines. */
export function mentionsCliLine(text: string): boolean {
  const drawn = [skeleton(text), tableFirstSkeleton(text)];
  return CLI_LINE_SKELETONS.some((start) => drawn.some((skeleton) => skeleton.includes(start)));
}

/** What marks a line of the final answer that begins like one of the CLI's own lines. */
export const ANSWER_MARK = "(回答) ";

/** Columns `text` may take on a terminal: 1 for printable ASCII, 2 for anything else. */
export function columns(text: string): number {
  let total = 0;
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    total += code >= 0x20 && code <= 0x7e ? 1 : 2;
  }
  return total;
}

/** The widest line an 80-column terminal shows on one row. */
const ROW_COLUMNS = 79;
/** Code units of a wide line the look-alike check reads anywhere in it; a longer line is marked unread. */
const MAX_CHECKED_LINE = 4096;

/**
 * The final answer as printed: `visible`, and every line that begins like one of the CLI's own lines marked
 * with `(回答) `, so no line of it passes for an audit record, a prompt or a notice. Other lines are unchanged
 * (a long line's later rows, where the terminal wraps it, are not: docs/security.md says so).
 */
export function shownAnswer(text: string): string {
  return text
    .split("\n")
    .map((line) => {
      // Looked at as written: a hidden first character is shown as an escape, yet a reader of the line sees nothing
      // there, so what follows it is what must not pass for a CLI line. What visible() changes only adds escapes.
      const shown = visible(line);
      return startsLikeCliLine(line) ? `${ANSWER_MARK}${shown}` : shown;
    })
    .join("\n");
}

/**
 * Whether `text`, printed after `own` (the CLI's own words, such as `运行失败: `), is too wide for one row and holds
 * something that reads like a CLI line start anywhere: the terminal may wrap right before it. A line past 4,096
 * code units counts unread.
 */
export function wrapsIntoCliLine(text: string, own = ""): boolean {
  if ((own.length + text.length) * 2 <= ROW_COLUMNS || columns(own) + columns(text) <= ROW_COLUMNS) return false;
  return text.length > MAX_CHECKED_LINE || mentionsCliLine(text);
}

// What may stand before a line's first visible character and draw nothing there: white space, hidden characters
// (U+3164 and its kin among them), combining marks with nothing to combine with, the Braille blank.
const UNSEEN_START = new RegExp(`^(?:\\s|${HIDDEN_CHARACTER.source}|\\p{M}|\\u2800)+`, "u");

/**
 * Whether `line` begins like one of the CLI's own lines as a reader sees it: after whatever draws nothing at
 * its start, and by skeleton, so full-width, compatible and look-alike spellings of a prefix count too.
 */
function startsLikeCliLine(line: string): boolean {
  // Only the start is compared, so only the start is folded: NFKC can make 18 characters of one (U+FDFA), and a
  // whole hostile line folded would take seconds and gigabytes.
  const head = Array.from(line.replace(UNSEEN_START, "").slice(0, 2 * START_CODE_POINTS))
    .slice(0, START_CODE_POINTS)
    .join("");
  const starts = [skeleton(head), tableFirstSkeleton(head)];
  return CLI_LINE_SKELETONS.some((prefix) => starts.some((start) => start.startsWith(prefix)));
}

/** How much of a line's start the look-alike check folds: far more than the longest CLI line start, in any spelling. */
const START_CODE_POINTS = 32;

/** `\t`, `\n`, `\u202e`, or `\u{e0041}` above U+FFFF. */
export function escaped(char: string): string {
  if (char === "\t") return "\\t";
  if (char === "\n") return "\\n";
  const code = char.codePointAt(0) ?? 0;
  return code > 0xffff ? `\\u{${code.toString(16)}}` : `\\u${code.toString(16).padStart(4, "0")}`;
}
