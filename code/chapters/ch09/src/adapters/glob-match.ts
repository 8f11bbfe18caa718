/**
 * The `glob` tool's patterns: `*`, `?` and `[...]` within a name, `**` alone as a segment for any number of
 * folders; everything else, braces and parentheses included, is a literal character. Segments are split at `/`
 * (the caller turns `\` into `/`). As before (fast-glob without braces and extglobs): case-sensitive; `*` or `?`
 * at the start of a name, and `**`, never match a name that starts with a dot, while a class may (`[.]env`); a
 * class of plain letters also matches its own text, so `pages/[id].tsx` finds the file named so; a trailing `**`
 * matches what is inside the folder before it (`src/**`), not the folder; and `**.ts`
 * alone (picomatch's shorthand) finds `.ts` files in every folder.
 *
 * Matching never backtracks: a name is checked against the runs between its `*`s one run at a time, each run
 * placed at its leftmost fit, which is where a match can be found if there is one. The time is linear in the name
 * (times the longest run, which cannot be longer than the name), so `*a*a*a*a*a*a*a*a*a*a*a*a*b` is as quick as
 * `*.ts`. A name holding `[` is checked against a segment whose classes match their own text too by keeping the
 * set of positions still possible (linear as well); a folder walk does the same with the pattern's segments.
 */

/** One segment of a compiled pattern. */
export type GlobSegment =
  | { readonly kind: "globstar" }
  | {
      readonly kind: "name";
      /** The segment's text when it has no wildcard: a folder the walk may open directly. */
      readonly literal: string | undefined;
      matches(name: string): boolean;
    };

export interface Glob {
  /** Empty when the pattern can match no file (it ends with `/`, or is only `.`). */
  readonly segments: readonly GlobSegment[];
  /** One mark per position, reused by each `step` (which runs to the end before another starts). */
  readonly marks: Uint8Array;
}

/** A code unit, `?` (ANY), or a class; in a segment's tokens also STAR, between runs. */
type Unit = number | CharClass;
type Token = Unit;
const ANY = -1;
const STAR = -2;
const DOT = 0x2e;

interface CharClass {
  readonly negated: boolean;
  /** Inclusive [from, to] code-unit pairs, one after the other. */
  readonly ranges: readonly number[];
  /** The class's own text (`[id]`), which it matches too when it holds only plain characters. */
  readonly alternative: string | undefined;
}

/** A run of units between two `*`s, with its text when every unit is a plain character. */
interface Run {
  readonly units: readonly Unit[];
  readonly text: string | undefined;
}

const GLOBSTAR: GlobSegment = { kind: "globstar" };
// picomatch's `**.ext` shorthand for the whole pattern: every `.ext` file, in any folder.
const ANY_DEPTH_EXTENSION = /^\*\*((?:\.\w+)+)$/;

export function compileGlob(pattern: string): Glob {
  // `a//b` is `a/b` and `./a` is `a`, as they are for every path the tools take.
  const parts = pattern
    .split("/")
    .filter((part, index, all) => (part !== "" && part !== ".") || index === all.length - 1);
  // A trailing `/` (or `/.`) names a folder, and only files are listed.
  const last = parts.at(-1);
  if (last === undefined || last === "" || last === ".") return { segments: [], marks: new Uint8Array(1) };
  const extension = parts.length === 1 ? ANY_DEPTH_EXTENSION.exec(last)?.[1] : undefined;
  const texts = extension === undefined ? parts : ["**", `*${extension}`];
  const segments: GlobSegment[] = [];
  for (const text of texts) {
    // `**/**` is `**`: one position instead of many for the walk to keep.
    if (text === "**" && segments.at(-1) === GLOBSTAR) continue;
    segments.push(text === "**" ? GLOBSTAR : compileSegment(text));
  }
  // `src/**` lists what is in src: the last `**` matches at least the file's own name, as `**/*` does.
  if (segments.at(-1) === GLOBSTAR) segments.push(compileSegment("*"));
  return { segments, marks: new Uint8Array(segments.length + 1) };
}

function compileSegment(text: string): GlobSegment {
  const tokens: Token[] = [];
  for (let at = 0; at < text.length;) {
    const char = text.charCodeAt(at);
    if (char === 0x2a /* * */) {
      if (tokens.at(-1) !== STAR) tokens.push(STAR);
      at += 1;
    } else if (char === 0x3f /* ? */) {
      tokens.push(ANY);
      at += 1;
    } else if (char === 0x5b /* [ */) {
      const parsed = parseClass(text, at);
      tokens.push(parsed?.unit ?? char);
      at = parsed?.next ?? at + 1;
    } else {
      tokens.push(char);
      at += 1;
    }
  }
  const runs: Unit[][] = [[]];
  for (const token of tokens) {
    if (token === STAR) runs.push([]);
    else (runs.at(-1) as Unit[]).push(token);
  }
  const compiled = runs.map(toRun);
  const literal = compiled.length === 1 ? compiled[0]?.text : undefined;
  if (literal !== undefined) return { kind: "name", literal, matches: (name) => name === literal };
  const noDot = tokens[0] === STAR || tokens[0] === ANY;
  const minLength = compiled.reduce((sum, run) => sum + run.units.length, 0);
  const either = tokens.some((token) => typeof token === "object" && token.alternative !== undefined);
  const nfa = either ? buildNfa(tokens) : undefined;
  return {
    kind: "name",
    literal: undefined,
    matches: (name) =>
      name.length >= minLength &&
      !(noDot && name.charCodeAt(0) === DOT) &&
      // Without a `[` in the name no class can match its own text: the runs decide.
      (nfa !== undefined && name.includes("[") ? runNfa(nfa, name) : matchRuns(compiled, name)),
  };
}

function toRun(units: Unit[]): Run {
  const plain = units.every((unit) => typeof unit === "number" && unit !== ANY);
  return { units, text: plain ? String.fromCharCode(...(units as number[])) : undefined };
}

/** Runs separated by `*`s: the first anchored at the start, the last at the end, the others leftmost in order. */
function matchRuns(runs: readonly Run[], name: string): boolean {
  const head = runs[0] as Run;
  if (runs.length === 1) return name.length === head.units.length && runAt(head, name, 0);
  const tail = runs[runs.length - 1] as Run;
  const end = name.length - tail.units.length;
  if (!runAt(head, name, 0) || !runAt(tail, name, end)) return false;
  let from = head.units.length;
  for (let index = 1; index < runs.length - 1; index += 1) {
    const run = runs[index] as Run;
    const at = findRun(run, name, from, end - run.units.length);
    if (at === -1) return false;
    from = at + run.units.length;
  }
  return from <= end;
}

function runAt(run: Run, name: string, at: number): boolean {
  if (run.text !== undefined) return name.startsWith(run.text, at);
  for (let index = 0; index < run.units.length; index += 1) {
    if (!unitMatches(run.units[index] as Unit, name.charCodeAt(at + index))) return false;
  }
  return true;
}

/** The first position in [from, lastStart] where `run` fits, or -1. */
function findRun(run: Run, name: string, from: number, lastStart: number): number {
  if (run.text !== undefined) {
    const at = name.indexOf(run.text, from);
    return at !== -1 && at <= lastStart ? at : -1;
  }
  for (let at = from; at <= lastStart; at += 1) if (runAt(run, name, at)) return at;
  return -1;
}

function unitMatches(unit: Unit, char: number): boolean {
  if (typeof unit === "number") return unit === ANY || unit === char;
  let inside = false;
  for (let index = 0; index < unit.ranges.length && !inside; index += 2) {
    inside = char >= (unit.ranges[index] as number) && char <= (unit.ranges[index + 1] as number);
  }
  return inside !== unit.negated;
}

// POSIX classes inside brackets, as fast-glob (picomatch with `posix: true`) read them.
const POSIX: Readonly<Record<string, string>> = {
  alnum: "azAZ09",
  alpha: "azAZ",
  ascii: "\u0000\u007f",
  blank: "  \t\t",
  cntrl: "\u0000\u001f\u007f\u007f",
  digit: "09",
  graph: "!~",
  lower: "az",
  print: " ~",
  punct: "!/:@[`{~",
  space: "  \t\r",
  upper: "AZ",
  word: "azAZ09__",
  xdigit: "afAF09",
};

/**
 * `[abc]`, `[a-z]`, `[!a]` or `[^a]`, `[]a]` (a `]` first is a member), `[[:alpha:]]`. Without a closing `]` in
 * the segment the `[` is a plain character, and the caller says so by getting undefined.
 */
function parseClass(text: string, open: number): { unit: CharClass; next: number } | undefined {
  let at = open + 1;
  const negated = text[at] === "!" || text[at] === "^";
  if (negated) at += 1;
  const ranges: number[] = [];
  for (let first = true; at < text.length; first = false) {
    const char = text.charCodeAt(at);
    if (char === 0x5d /* ] */ && !first) {
      const plain = !negated && !/[-*+?.^${}(|)[\]]/.test(text.slice(open + 1, at));
      return { unit: { negated, ranges, alternative: plain ? text.slice(open, at + 1) : undefined }, next: at + 1 };
    }
    if (char === 0x5b && text[at + 1] === ":") {
      const close = text.indexOf(":]", at + 2);
      const members = close === -1 ? undefined : POSIX[text.slice(at + 2, close)];
      if (members !== undefined) {
        for (let index = 0; index < members.length; index += 1) ranges.push(members.charCodeAt(index));
        at = close + 2;
        continue;
      }
    }
    const to = text.charCodeAt(at + 2);
    if (text[at + 1] === "-" && at + 2 < text.length && to !== 0x5d) {
      ranges.push(char, to);
      at += 3;
    } else {
      ranges.push(char, char);
      at += 1;
    }
  }
  return undefined;
}

/** A character position of a segment: it reads one code unit (`test`), or any number of them (a `*`). */
interface NfaNode {
  readonly test: Token | undefined;
  next: readonly number[];
}

/** Node 0 is the end; `start` the nodes a name begins at. A class with its own text is two branches. */
function buildNfa(tokens: readonly Token[]): { nodes: NfaNode[]; start: readonly number[] } {
  const nodes: NfaNode[] = [{ test: undefined, next: [] }];
  const add = (test: Token, next: readonly number[]): number => nodes.push({ test, next }) - 1;
  let arrive: readonly number[] = [0];
  for (let index = tokens.length - 1; index >= 0; index -= 1) {
    const token = tokens[index] as Token;
    if (token === STAR) {
      const star = nodes[add(STAR, [])] as NfaNode;
      arrive = [nodes.length - 1, ...arrive];
      star.next = arrive;
    } else if (typeof token === "object" && token.alternative !== undefined) {
      let text: readonly number[] = arrive;
      for (let at = token.alternative.length - 1; at >= 0; at -= 1) {
        text = [add(token.alternative.charCodeAt(at), text)];
      }
      arrive = [add(token, arrive), ...text];
    } else {
      arrive = [add(token, arrive)];
    }
  }
  return { nodes, start: arrive };
}

function runNfa({ nodes, start }: { nodes: NfaNode[]; start: readonly number[] }, name: string): boolean {
  const seen = new Int32Array(nodes.length).fill(-1);
  let current = start;
  for (let at = 0; at < name.length && current.length > 0; at += 1) {
    const char = name.charCodeAt(at);
    const next: number[] = [];
    for (const index of current) {
      const node = nodes[index] as NfaNode;
      if (node.test === undefined || (node.test !== STAR && !unitMatches(node.test, char))) continue;
      for (const target of node.next) {
        if (seen[target] === at) continue;
        seen[target] = at;
        next.push(target);
      }
    }
    current = next;
  }
  return current.includes(0);
}

/** The positions reachable from `at` without reading a name: past every `**`, which may match no folder. */
export function startStates(glob: Glob, at: number): number[] {
  glob.marks[at] = 1;
  return collect(glob);
}

/** The positions after reading `name` (a folder or file) from any of `states`. */
export function step(glob: Glob, states: readonly number[], name: string): readonly number[] {
  const { marks } = glob;
  const hidden = name.charCodeAt(0) === DOT;
  let any = false;
  for (const at of states) {
    const segment = glob.segments[at];
    if (segment === undefined) continue;
    if (segment.kind === "globstar") {
      if (!hidden) marks[at] = 1;
    } else if (segment.matches(name)) {
      marks[at + 1] = 1;
    } else continue;
    any = true;
  }
  return any ? collect(glob) : NONE;
}

const NONE: readonly number[] = [];

/** The marked positions in order, with every position after a marked `**`; clears the marks. */
function collect({ segments, marks }: Glob): number[] {
  const states: number[] = [];
  for (let at = 0; at < marks.length; at += 1) {
    if (marks[at] === 0) continue;
    marks[at] = 0;
    states.push(at);
    if (segments[at]?.kind === "globstar") marks[at + 1] = 1;
  }
  return states;
}

/** Whether a file read into `states` matches: the whole pattern is used up. */
export const isComplete = (glob: Glob, states: readonly number[]): boolean => states.at(-1) === glob.segments.length;

/** Whether a folder read into `states` may hold a match: some of the pattern is left. */
export const hasRest = (glob: Glob, states: readonly number[]): boolean =>
  states.length > 0 && (states[0] as number) < glob.segments.length;

/** Whether a workspace-relative `/` path of a file matches, as a walk from the workspace would find it. */
export function matchesPath(glob: Glob, path: string): boolean {
  let states: readonly number[] = startStates(glob, 0);
  for (const name of path.split("/")) {
    if (states.length === 0) return false;
    states = step(glob, states, name);
  }
  return isComplete(glob, states);
}
