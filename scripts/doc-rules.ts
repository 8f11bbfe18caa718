// The writing rules every guide and doc (chapters/*.md, README.md, docs/*.md) is held to by verify:guides:
//   - no line numbers: `L48–L56`, `loop.ts:48`, `#L48`, 第 48 行, line 48 all go stale with the next edit of
//     the file; name the function, the type or the test instead;
//   - every `npm run <name>` is a script of the root package.json (one run inside a snapshot's own package,
//     `npm -w code/chapters/ch03 run build` or after `cd code/chapters/ch03`, is left alone);
//   - no pointers to the project's own specification or issue tracker: `SPEC`, `§3`, the word issue. A GitHub
//     URL and an `owner/repo#123` reference (npm/cli#4903) may stand, they point at someone else's tracker;
//   - a command that pipes or redirects the output of `npm run` (`|`, `>`, `2>`, `Out-File`, `Tee-Object`) runs
//     it as `npm run -s`, or npm's `> agent-tutorial@… script` banner ends up in the output.
//   - a chapter guide (chapters/chNN.md) other than the newest chapter's never names a bare `npm run demo`: that
//     plays the newest chapter (the root package.json's `demo` script says which); the guide names `npm run demo:chNN`.
//   - (checked by verify-guides.ts against the root .gitignore) every file or folder a guide's command makes in the
//     repository root is git-ignored, so git status stays clean after following a guide (createdNames).
//   - Chinese prose takes full-width punctuation: no `,` `;` `:` `?` `!` right after a Chinese character, and no
//     half-width brackets or "…" around Chinese words. Code and program output stay as they are: inline code and
//     code blocks are not checked.

/** One line of a Markdown file, and the fenced code block it is in, if any (its language, "" for none). */
export interface DocLine {
  readonly number: number;
  readonly text: string;
  readonly fence: string | undefined;
}

const FENCE = /^\s*(`{3,}|~{3,})\s*([\w-]*)/;
// The languages a reader types into a shell; `text` blocks show output, not commands.
const SHELLS = new Set(["", "bash", "sh", "shell", "zsh", "console", "powershell", "pwsh", "ps1", "ps", "cmd", "bat"]);

/**
 * The lines of a Markdown file outside the fence lines themselves. A block closes only at a bare fence at least as
 * long as its opening (CommonMark), so a line inside a block that starts with ``` and goes on does not end it.
 */
export function docLines(doc: string): DocLine[] {
  const lines: DocLine[] = [];
  let fence: { marker: string; language: string } | undefined;
  doc.split("\n").forEach((text, index) => {
    const opening = FENCE.exec(text);
    const closes = fence !== undefined && opening?.[1]?.startsWith(fence.marker) === true && text.trim() === opening[1];
    if (opening !== null && (fence === undefined || closes)) {
      fence =
        fence === undefined ? { marker: opening[1] as string, language: (opening[2] ?? "").toLowerCase() } : undefined;
      return;
    }
    lines.push({ number: index + 1, text, fence: fence?.language });
  });
  return lines;
}

const INLINE_CODE = /`([^`]+)`/g;

/** The inline code spans of a line outside code blocks. */
function inlineCode(text: string): string[] {
  return [...text.matchAll(INLINE_CODE)].map((match) => (match[1] as string).replace(/\\\|/g, "|"));
}

// --- line numbers -----------------------------------------------------------------------------------------

// `L48`, `L48–L56`, `L48-56`; a file's line, `loop.ts:48`, `loop.ts:48-56`, `loop.ts#L48`.
const LINE_MARKS = [
  /\bL\d+(?:\s*[–—-]\s*L?\d+)?\b/g,
  /\.(?:ts|tsx|js|mjs|cjs|json|md|ps1|sh|ya?ml)(?::\d+(?:\s*[–-]\s*\d+)?\b|#L\d+(?:-L\d+)?)/g,
];
// In prose only, where they cannot be an output's own words (`命令 (第 1 行, 共 N 行)` is a CLI string).
const PROSE_LINE_MARKS = [/第\s*\d+(?:\s*[–-]\s*\d+)?\s*行/g, /\blines?\s+\d+(?:\s*[–-]\s*\d+)?\b/gi];

function lineNumberProblems(name: string, lines: readonly DocLine[]): string[] {
  return lines.flatMap((line) => {
    if (line.fence !== undefined) return [];
    const prose = line.text.replace(INLINE_CODE, " ");
    const matches = [
      ...LINE_MARKS.flatMap((mark) => [...line.text.matchAll(mark)]),
      ...PROSE_LINE_MARKS.flatMap((mark) => [...prose.matchAll(mark)]),
    ].sort((a, b) => a.index - b.index || b[0].length - a[0].length);
    // `loop.ts#L48` is one mark, not also an `L48`.
    let end = 0;
    const found: string[] = [];
    for (const match of matches) {
      if (match.index < end) continue;
      found.push(match[0]);
      end = match.index + match[0].length;
    }
    return found.length === 0
      ? []
      : [`${name}:${line.number}: cites line numbers (${found.join(", ")}); name the function, type or test instead`];
  });
}

// --- npm run <name> ---------------------------------------------------------------------------------------

// `npm run diff`, `npm run -s ch01`, `npm -s run test:ch03`: the words up to the script's name.
const NPM_RUN = /\bnpm((?:\s+-[\w-]+(?:[= ][^\s-]\S*)?)*)\s+run(?:-script)?((?:\s+-[\w-]+)*)\s+([A-Za-z0-9][\w:.-]*)/g;
const WORKSPACE_FLAG = /\s(?:-w|--workspace|--workspaces|-ws)(?:[\s=]|$)/;
const CHAPTER_FOLDER = /\bcd\s+\S*code[\\/]chapters[\\/]ch\d\d/;

function scriptProblems(name: string, lines: readonly DocLine[], scripts: ReadonlySet<string>): string[] {
  const problems: string[] = [];
  let insideSnapshot = false;
  let fence: string | undefined;
  for (const line of lines) {
    if (line.fence !== fence) insideSnapshot = false;
    fence = line.fence;
    if (fence !== undefined && CHAPTER_FOLDER.test(line.text)) insideSnapshot = true;
    if (insideSnapshot) continue;
    for (const match of line.text.matchAll(NPM_RUN)) {
      const script = (match[3] as string).replace(/[.:]+$/, "");
      // npm's own flags may follow the name too, up to the `--` that starts the script's arguments.
      const after = line.text.slice(match.index + match[0].length).split(/\s--(?:\s|$)|`/)[0] ?? "";
      // A placeholder (`npm run chNN`), or a run in a snapshot's own package, is not a root script.
      if (/NN/.test(script) || WORKSPACE_FLAG.test(`${match[1] ?? ""}${match[2] ?? ""}${after} `)) continue;
      if (!scripts.has(script)) {
        problems.push(`${name}:${line.number}: npm run ${script} is not a script of the root package.json`);
      }
    }
  }
  return problems;
}

// --- npm run demo is the newest chapter's --------------------------------------------------------------------

// `npm run demo`, `npm run -s demo`, but not `npm run demo:ch05`.
const BARE_DEMO = /\bnpm(?:\s+-[\w-]+)*\s+run(?:\s+-[\w-]+)*\s+demo(?![\w:-])/g;

/** The chapter (`ch08`) whose demo `npm run demo` plays, read from the root package.json's `demo` script. */
export function newestDemoChapter(scripts: Readonly<Record<string, string>>): string | undefined {
  return /code\/chapters\/(ch\d\d)\//.exec(scripts.demo ?? "")?.[1];
}

function demoProblems(name: string, lines: readonly DocLine[], newest: string | undefined): string[] {
  const chapter = /(?:^|\/)(ch\d\d)\.md$/.exec(name)?.[1];
  if (newest === undefined || chapter === undefined || chapter === newest) return [];
  return lines.flatMap((line) =>
    [...line.text.matchAll(BARE_DEMO)].map(
      () => `${name}:${line.number}: names npm run demo, which plays ${newest}'s demo; write npm run demo:${chapter}`,
    ),
  );
}

// --- names a reader makes in the repository --------------------------------------------------------------

/** A file or folder a guide's command makes in the folder npm runs from, the repository root (`folder`: a folder). */
export interface CreatedName {
  readonly line: number;
  readonly path: string;
  readonly folder: boolean;
}

// A name as a command line spells it, not an option (`-p`).
const NAME = String.raw`[\w.\\/][\w.\\/-]*`;
const MADE: readonly (readonly [RegExp, boolean])[] = [
  [/--transcript\s+([\w.-]+\.json)\b/g, false],
  [new RegExp(String.raw`(?:--workspace|-w)\s+(${NAME})`, "g"), true],
  [new RegExp(String.raw`New-Item\s+-ItemType\s+Directory\s+(?:-Force\s+)?(${NAME}(?:\s*,\s*${NAME})*)`, "g"), true],
  [new RegExp(String.raw`\bmkdir\s+(?:-p\s+)?(${NAME}(?:[ \t]+${NAME})*)`, "g"), true],
];

/**
 * The files and folders the commands of `doc` make in the repository root: a `--transcript` file, a `--workspace`
 * folder, a `New-Item -ItemType Directory` or `mkdir` folder, in shell blocks and inline code. A name outside the
 * root (`../exp-ch05`, an absolute path) or a placeholder (`<一个空文件夹>`) is no such name.
 */
export function createdNames(doc: string): CreatedName[] {
  return docLines(doc).flatMap((line) => {
    const texts = line.fence === undefined ? inlineCode(line.text) : SHELLS.has(line.fence) ? [line.text] : [];
    return texts.flatMap((text) =>
      MADE.flatMap(([pattern, folder]) =>
        [...text.matchAll(pattern)].flatMap((match) =>
          (match[1] as string)
            .split(/\s*,\s*|\s+/)
            .map((name) => name.replace(/\\/g, "/").replace(/^\.\//, "").replace(/\/+$/, ""))
            .filter((name) => name !== "" && name !== "." && !name.startsWith("/") && !name.split("/").includes(".."))
            .map((path) => ({ line: line.number, path, folder })),
        ),
      ),
    );
  });
}

// --- SPEC and issues --------------------------------------------------------------------------------------

// Someone else's tracker may be cited: a URL, or an `owner/repo#123` reference.
const ALLOWED_POINTERS = [/https?:\/\/[^\s)>\]]+/g, /\bgithub\.com\/[^\s)>\]]+/g, /\b[\w.-]+\/[\w.-]+#\d+\b/g];
const TRACKER_WORDS: readonly (readonly [RegExp, string])[] = [
  [/\bSPEC\b/g, "SPEC"],
  [/§\s*\d+/g, "a § section"],
  [/\bissues?\b/gi, "an issue"],
];

function trackerProblems(name: string, lines: readonly DocLine[]): string[] {
  return lines.flatMap((line) => {
    const text = ALLOWED_POINTERS.reduce((rest, pointer) => rest.replace(pointer, " "), line.text);
    return TRACKER_WORDS.flatMap(([word, what]) =>
      [...text.matchAll(word)].map(
        (match) => `${name}:${line.number}: mentions ${what} ("${match[0]}"); say what the reader needs instead`,
      ),
    );
  });
}

// --- npm run output into a pipe or a file -----------------------------------------------------------------

// What ends one command: a pipe, a redirect, or a separator. `||` before `|`, `>>` and `2>` before `>`.
const COMMAND_END = /\|\||&&|;|\||\d?>>?|\*>/;
const SILENT = /\s(?:-s|--silent|--loglevel[= ]silent)(?=\s|$)/;

/**
 * The commands in `command` that run `npm run` with its output piped or redirected and without `-s`.
 * Quoted strings, `<placeholders>` and `# comments` are not part of the command's plumbing.
 */
function unsilencedPipes(command: string): string[] {
  const plain = command
    .replace(/"[^"]*"|'[^']*'/g, '""')
    .replace(/<[^<>\s|]+>/g, "X")
    .replace(/\s#.*$/, "");
  const found: string[] = [];
  for (const npm of plain.matchAll(/\bnpm\b/g)) {
    const rest = plain.slice(npm.index);
    const end = COMMAND_END.exec(rest);
    const own = end === null ? rest : rest.slice(0, end.index);
    if (!/\srun(?:-script)?\s/.test(`${own} `)) continue;
    // Out-File and Tee-Object only ever take npm's output through a pipe.
    const redirected = end !== null && (end[0] === "|" || end[0].includes(">"));
    const npmFlags = own.split(/\s--(?:\s|$)/)[0] as string;
    if (redirected && !SILENT.test(`${npmFlags} `)) found.push(own.trim());
  }
  return found;
}

function pipeProblems(name: string, lines: readonly DocLine[]): string[] {
  const problems: string[] = [];
  // A fenced command may go on over several lines: `\` (bash) or a backtick (PowerShell) at the end, or `|` first.
  let pending: { number: number; last: number; text: string } | undefined;
  const check = (number: number, command: string): void => {
    for (const npm of unsilencedPipes(command)) {
      problems.push(`${name}:${number}: pipes or redirects the output of \`${npm}\`; write npm run -s`);
    }
  };
  const flush = (): void => {
    if (pending !== undefined) check(pending.number, pending.text);
    pending = undefined;
  };
  for (const line of lines) {
    if (line.fence === undefined) {
      flush();
      for (const code of inlineCode(line.text)) check(line.number, code);
      continue;
    }
    if (!SHELLS.has(line.fence)) {
      flush();
      continue;
    }
    const text = line.text.trim();
    const continues =
      pending !== undefined &&
      pending.last + 1 === line.number &&
      (pending.text.endsWith("\\") || pending.text.endsWith("`") || text.startsWith("|"));
    if (pending !== undefined && continues) {
      const joined = `${pending.text.replace(/[\\`]$/, "").trimEnd()} ${text}`;
      pending = { number: pending.number, last: line.number, text: joined };
      continue;
    }
    flush();
    pending = { number: line.number, last: line.number, text };
  }
  flush();
  return problems;
}

// --- full-width punctuation in Chinese prose --------------------------------------------------------------

const HALF_WIDTH: readonly (readonly [RegExp, string])[] = [
  [/\p{Script=Han}[,;:?!](?=\s|$)/gu, "，；：？！"],
  [/\([^()]*\p{Script=Han}[^()]*\)/gu, "（）"],
  [/"[^"]*\p{Script=Han}[^"]*"/gu, "“”"],
];
// A link's target is an address, not prose: `[文本](../a.ts) 里` is no bracket against a Chinese character.
const LINK_TARGET = /\]\([^)\s]*\)/g;

function punctuationProblems(name: string, lines: readonly DocLine[]): string[] {
  return lines.flatMap((line) => {
    if (line.fence !== undefined) return [];
    const prose = line.text.replace(INLINE_CODE, "`…`").replace(LINK_TARGET, "]");
    return HALF_WIDTH.flatMap(([mark, fullWidth]) =>
      [...prose.matchAll(mark)].map(
        (match) =>
          `${name}:${line.number}: half-width punctuation in Chinese prose ("${match[0]}"); write ${fullWidth}`,
      ),
    );
  });
}

/**
 * Every way `doc` (named `name` in the messages) breaks the writing rules; empty when it keeps them all. `newestDemo`
 * is the chapter `npm run demo` plays (newestDemoChapter).
 */
export function docProblems(name: string, doc: string, scripts: ReadonlySet<string>, newestDemo?: string): string[] {
  const lines = docLines(doc);
  return [
    ...lineNumberProblems(name, lines),
    ...scriptProblems(name, lines, scripts),
    ...demoProblems(name, lines, newestDemo),
    ...trackerProblems(name, lines),
    ...pipeProblems(name, lines),
    ...punctuationProblems(name, lines),
  ];
}
