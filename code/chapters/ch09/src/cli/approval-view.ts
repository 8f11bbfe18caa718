import { columns, escaped, hasHiddenCharacters, mentionsCliLine, oneLine } from "./visible.js";

export { columns } from "./visible.js";

/**
 * How much of a call the terminal shows, in columns: a printable ASCII character counts 1 and any other
 * character 2, as wide as a terminal may draw it, so a bound holds for Chinese text too.
 */
export const BOUNDS = {
  /** An ordinary call's JSON fits on the `参数: ` row of an 80-column terminal, so no row after it is the model's. */
  ordinaryLine: 73,
  /** A run of more spaces than this is shown as its count (and makes a call not ordinary). */
  longSpace: 16,
  /** A deciding line (`命令:`, `路径:`) never wraps on an 80-column terminal, so the row above the question is ours. */
  decidingLine: 79,
  /** A bounded view is cut into rows this wide itself, so on an 80-column terminal none wraps. */
  row: 79,
  /** The approval shows this many rows at a time, and asks before the next ones: with the header lines and the
   * prompt, a page fits a 24-row terminal, so no row of it scrolls away unseen. */
  pageRows: 20,
  /** Past this many rows, or nested deeper than the view draws, nobody could read what `y` approves: not asked. */
  approvalRows: 400,
  /** A progress line `→ <tool> <arguments>` shows at most this much of the arguments, … */
  progressLine: 200,
  /** … and of each string in them, if they had to be shortened. */
  progressValue: 60,
  /** The tool name on a progress line. */
  progressName: 60,
} as const;

/** The arguments of a call as the approval question shows them: all of them, or (`complete: false`) nothing. */
export interface ArgumentsView {
  /** What follows `参数: `: the JSON itself for an ordinary call, else the first row of the whole view. */
  readonly json: string;
  /** Lines between `参数:` and the question: none for an ordinary call. */
  readonly below: readonly string[];
  /** False when the arguments cannot be shown whole within `approvalRows` rows: the call is then not asked about. */
  readonly complete: boolean;
}

/** How each row after the first of a bounded view begins, so that no row begins with the model's text. */
export const CONTINUED = "    | ";

export const HIDDEN_NOTE = "注意: 参数里有不显示的字符 (双向控制、零宽字符等), 上面已写成 \\u… 转义。";

// The arguments that decide what a call does, shown again right above the question.
const DECIDING: readonly (readonly [key: string, label: string])[] = [
  ["command", "命令"],
  ["path", "路径"],
];

// White space, and the Braille blank, which is none but is drawn as an empty cell all the same.
const SPACE = "[ \\u00a0\\u1680\\u2000-\\u200a\\u202f\\u205f\\u3000\\u2800]";
const LONG_SPACE = new RegExp(`${SPACE}{${BOUNDS.longSpace + 1},}`);
const SPACE_CHAR = new RegExp(SPACE);
const BREAKS = /[\t\n\r]/;

/**
 * An ordinary call (its JSON fits on the `参数: ` row of an 80-column terminal, no run of more than 16 spaces,
 * no invisible character, nothing that reads like one of the CLI's own lines) shows as its JSON, the book's
 * `参数:` line. Any other call shows whole — every string in full, escaped, long runs of spaces counted — cut
 * into rows of its own, then the note on invisible characters if it has any, then its deciding arguments (the
 * command's first line, the path), right above the question. Nothing `y` approves is left out: arguments that
 * would take more than `approvalRows` rows, or nest deeper than the view draws, are `complete: false`.
 */
export function argumentsView(args: Readonly<Record<string, unknown>>): ArgumentsView {
  const json = ordinaryJson(args);
  if (json !== undefined) return { json: oneLine(json), below: [], complete: true };
  // Checked before drawing, so a huge argument is never copied, and a deep one never walked past the limit.
  if (!fitsWhole(args, BOUNDS.approvalRows * (BOUNDS.row - columns(CONTINUED)), 0)) {
    return { json: "", below: [], complete: false };
  }
  const [first = "", ...rest] = wrapped(shownJson(args, Infinity, Infinity), columns("参数: "));
  const below = [...rest, ...(someString(args, hasHiddenCharacters) ? [HIDDEN_NOTE] : []), ...decidingLines(args)];
  if (below.length + 1 > BOUNDS.approvalRows) return { json: "", below: [], complete: false };
  return { json: first, below, complete: true };
}

/** Whether `value`'s strings, keys included, take at most `budget` columns and it nests no deeper than the view. */
function fitsWhole(value: unknown, budget: number, depth: number): boolean {
  return remaining(value, budget, depth) >= 0;
}

function remaining(value: unknown, budget: number, depth: number): number {
  if (typeof value === "string") return budget - (value.length > budget ? value.length : columns(value));
  if (typeof value !== "object" || value === null) return budget;
  if (depth >= MAX_JSON_DEPTH) return -1;
  let left = budget;
  for (const [key, item] of Object.entries(value)) {
    left = remaining(item, remaining(key, left, depth), depth + 1);
    if (left < 0) return left;
  }
  return left;
}

/**
 * The progress line of a call, `→ <tool> <arguments>`: as the model sent them when both are short and
 * plain, else bounded like the approval's view and cut into rows of its own. `lead` is our own words before
 * the arrow (chapter 6 marks a subagent's rows), counted in the row's width.
 */
export function progressRows(name: string, rawArguments: string, lead = ""): string[] {
  // One row of an 80-column terminal, or rows of our own: a second row it wrapped into would be the model's.
  // Measured as printed: a control character is drawn as a six-column escape.
  const fits =
    name.length + rawArguments.length <= BOUNDS.row &&
    columns(`${lead}→ ${oneLine(name)} ${oneLine(rawArguments)}`) <= BOUNDS.row;
  if (fits && isPlain(name, BOUNDS.progressName) && isPlain(rawArguments, BOUNDS.progressLine)) {
    return [`${lead}→ ${oneLine(name)} ${oneLine(rawArguments)}`];
  }
  return wrapped(`${lead}→ ${shownText(name, BOUNDS.progressName)} ${shownRawArguments(rawArguments)}`, 0);
}

/** Arguments as a progress line shows them: as sent when short and plain, else as their bounded JSON. */
export function shownRawArguments(raw: string): string {
  if (isPlain(raw, BOUNDS.progressLine)) return oneLine(raw);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return shownText(raw, BOUNDS.progressLine);
  }
  return shownJson(parsed, BOUNDS.progressValue, BOUNDS.progressLine);
}

/**
 * `text` on one line in at most `width` columns: escaped as `oneLine` does, a run of more than 16 spaces
 * shown as `[N 个空白]`, and if it is still too wide, its start and end around `[省略 N 个字符]`.
 */
export function shownText(text: string, width: number): string {
  return shown(text, width, false);
}

/**
 * `text` cut into rows of at most 79 columns, the first one printed after `indent` columns; every later
 * row begins with `    | `, so on an 80-column terminal no row begins with the model's text.
 */
export function wrapped(text: string, indent: number): string[] {
  const rows: string[] = [];
  let row = "";
  let used = indent;
  for (const char of text) {
    const width = columns(char);
    if (used + width > BOUNDS.row) {
      rows.push(row);
      row = CONTINUED;
      used = columns(CONTINUED);
    }
    row += char;
    used += width;
  }
  rows.push(row);
  return rows;
}

/** Short, one line, no long run of spaces, nothing invisible, nothing that reads like the CLI's own lines. */
function isPlain(text: string, width: number): boolean {
  return (
    text.length <= width &&
    columns(text) <= width &&
    !LONG_SPACE.test(text) &&
    !BREAKS.test(text) &&
    !hasHiddenCharacters(text) &&
    !mentionsCliLine(text)
  );
}

function ordinaryJson(args: Readonly<Record<string, unknown>>): string | undefined {
  // Checked before stringifying, so a huge argument is never copied whole.
  if (!fitsWhole(args, BOUNDS.ordinaryLine, 0)) return undefined;
  const json = JSON.stringify(args);
  const ordinary =
    json.length <= BOUNDS.ordinaryLine &&
    // As printed: JSON leaves C1 controls raw, and each is drawn as a six-column escape.
    columns(oneLine(json)) <= BOUNDS.ordinaryLine &&
    !LONG_SPACE.test(json) &&
    !hasHiddenCharacters(json) &&
    !mentionsCliLine(json);
  return ordinary ? json : undefined;
}

function decidingLines(args: Readonly<Record<string, unknown>>): string[] {
  return DECIDING.flatMap(([key, label]) => {
    const value = Object.hasOwn(args, key) ? args[key] : undefined;
    if (typeof value !== "string") return [];
    let text = value;
    let head = `${label}: `;
    if (key === "command") {
      const { first, count } = firstLine(value);
      text = first;
      if (count > 1) head = `${label} (第 1 行, 共 ${count} 行): `;
    }
    return [`${head}${shown(text, BOUNDS.decidingLine - columns(head), false)}`];
  });
}

/** The first line of `text` and how many lines it has (a final line break starts no new line). */
function firstLine(text: string): { first: string; count: number } {
  let first: number | undefined;
  let count = 1;
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code !== 0x0a && code !== 0x0d) continue;
    first ??= index;
    if (code === 0x0d && text.charCodeAt(index + 1) === 0x0a) index += 1;
    if (index + 1 < text.length) count += 1;
  }
  return { first: text.slice(0, first ?? text.length), count };
}

function someString(value: unknown, test: (text: string) => boolean): boolean {
  if (typeof value === "string") return test(value);
  if (typeof value !== "object" || value === null) return false;
  if (Array.isArray(value)) return value.some((item) => someString(item, test));
  return Object.entries(value).some(([key, item]) => test(key) || someString(item, test));
}

/** How deep a JSON view goes before it shows a nested array or object as `[…]` or `{…}`. */
const MAX_JSON_DEPTH = 8;

/** A JSON value on one line: each string through `shown`, members past `lineWidth` counted instead of shown. */
function shownJson(value: unknown, valueWidth: number, lineWidth: number, depth = 0): string {
  if (typeof value === "string") return shown(value, valueWidth, true);
  // A number, a boolean, null, or (in a sparse array) nothing at all, which JSON shows as null.
  if (typeof value !== "object" || value === null) return value === undefined ? "null" : JSON.stringify(value);
  const isArray = Array.isArray(value);
  // A model can nest its raw arguments thousands deep: past a few levels no line could show them anyway, and
  // walking them all would exhaust the stack. The mark stands outside any quotes, where a value cannot forge it.
  if (depth >= MAX_JSON_DEPTH) return isArray ? "[…]" : "{…}";
  const members: [string | undefined, unknown][] = isArray
    ? value.map((item: unknown) => [undefined, item])
    : Object.entries(value).filter((entry) => entry[1] !== undefined);
  let out = "";
  let used = 2;
  for (const [index, [key, item]] of members.entries()) {
    const name = key === undefined ? "" : `${shown(key, valueWidth, true)}:`;
    const member = `${index === 0 ? "" : ","}${name}${shownJson(item, valueWidth, Math.max(lineWidth - used, 40), depth + 1)}`;
    const rest = members.length - index;
    // Room for this member, and for the count of the ones after it if any would not fit.
    if (index > 0 && used + columns(member) + (rest > 1 ? 16 : 0) > lineWidth) {
      out += `,${moreMark(rest)}`;
      break;
    }
    out += member;
    used += columns(member);
  }
  return isArray ? `[${out}]` : `{${out}}`;
}

interface Piece {
  readonly text: string;
  /** Ours, not the value's: in a JSON view it stands outside the quotes, where the value cannot forge it. */
  readonly mark: boolean;
}

interface Taken {
  readonly pieces: Piece[];
  /** Where the taken part ends (forwards) or starts (backwards). */
  readonly at: number;
  readonly width: number;
}

/** `text` in at most `width` columns (about, in a JSON view), as a JSON string if `json`. */
function shown(text: string, width: number, json: boolean): string {
  const quotes = json ? 2 : 0;
  const whole = take(text, 0, text.length, width - quotes, json, 1);
  if (whole.at === text.length) return joined(whole.pieces, json);
  const room = Math.max(0, width - columns(hiddenMark(codePoints(text, 0, text.length))) - 2 * quotes);
  const head = take(text, 0, text.length, Math.ceil((room * 3) / 4), json, 1);
  const tail = take(text, head.at, text.length, room - head.width, json, -1);
  const hidden: Piece = { text: hiddenMark(codePoints(text, head.at, tail.at)), mark: true };
  return joined([...head.pieces, hidden, ...tail.pieces.reverse()], json);
}

/** Pieces from the start of `text[from, to)` forwards (`direction` 1) or from its end backwards (-1). */
function take(text: string, from: number, to: number, width: number, json: boolean, direction: 1 | -1): Taken {
  const pieces: Piece[] = [];
  let at = direction === 1 ? from : to;
  let used = 0;
  while (direction === 1 ? at < to : at > from) {
    const [piece, next] = direction === 1 ? pieceAfter(text, at, to, json) : pieceBefore(text, at, from, json);
    const cost = columns(piece.text) + (json && piece.mark ? 2 : 0);
    if (used + cost > width) break;
    pieces.push(piece);
    used += cost;
    at = next;
  }
  return { pieces, at, width: used };
}

function pieceAfter(text: string, at: number, to: number, json: boolean): [Piece, number] {
  let end = at;
  while (end < to && SPACE_CHAR.test(text.charAt(end))) end += 1;
  if (end - at > BOUNDS.longSpace) return [{ text: spaceMark(end - at), mark: true }, end];
  const size = isPair(text, at) ? 2 : 1;
  return [{ text: rendered(text.slice(at, at + size), json), mark: false }, at + size];
}

function pieceBefore(text: string, at: number, from: number, json: boolean): [Piece, number] {
  let start = at;
  while (start > from && SPACE_CHAR.test(text.charAt(start - 1))) start -= 1;
  if (at - start > BOUNDS.longSpace) return [{ text: spaceMark(at - start), mark: true }, start];
  const size = at - 2 >= from && isPair(text, at - 2) ? 2 : 1;
  return [{ text: rendered(text.slice(at - size, at), json), mark: false }, at - size];
}

function isPair(text: string, at: number): boolean {
  const high = text.charCodeAt(at);
  const low = text.charCodeAt(at + 1);
  return high >= 0xd800 && high <= 0xdbff && low >= 0xdc00 && low <= 0xdfff;
}

/** One character: JSON-escaped inside a JSON string, then as `oneLine` shows it; a lone surrogate as `\ud800`. */
function rendered(char: string, json: boolean): string {
  if (json) return oneLine(JSON.stringify(char).slice(1, -1));
  return char.length === 1 && char >= "\ud800" && char <= "\udfff" ? escaped(char) : oneLine(char);
}

function joined(pieces: readonly Piece[], json: boolean): string {
  if (!json) return pieces.map((piece) => piece.text).join("");
  let out = "";
  let open = false;
  for (const piece of pieces) {
    if (piece.mark === open) out += '"';
    open = !piece.mark;
    out += piece.text;
  }
  if (open) out += '"';
  return out === "" ? '""' : out;
}

function codePoints(text: string, from: number, to: number): number {
  let count = 0;
  for (let index = from; index < to; index += isPair(text, index) && index + 1 < to ? 2 : 1) count += 1;
  return count;
}

const spaceMark = (count: number): string => `[${count} 个空白]`;
const hiddenMark = (count: number): string => `[省略 ${count} 个字符]`;
const moreMark = (count: number): string => `[另有 ${count} 项]`;
