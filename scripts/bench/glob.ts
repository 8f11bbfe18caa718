// glob: the `glob` tool vs raw fast-glob with the same options, on a generated 100k-file tree with symlinks;
// then patterns that make a backtracking matcher try every split, against a 255-character name.
import { closeSync, mkdirSync, openSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import fg from "fast-glob";
import { MAX_GLOB_RESULTS, NodeWorkspaceFileSystem } from "../../code/chapters/ch03/src/adapters/filesystem.js";
import { compileGlob, matchesPath } from "../../code/chapters/ch03/src/adapters/glob-match.js";
import { toolCall } from "../../code/chapters/ch03/src/core/messages.js";
import { ToolRegistry } from "../../code/chapters/ch03/src/core/tools.js";
import { createGlobTool } from "../../code/chapters/ch03/src/features/builtin-tools.js";
import { nowNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { ratioText, type Row } from "./table.js";
import { makeTemp, removeTemp } from "./temp.js";

const TOP = 100;
const MIDDLE = 10;
const LEAVES = 100;
const LINKS = 10;
/** One deep file with a unique name: finding it needs the whole walk and returns one match. */
const NEEDLE = "d057/s3/needle-0042.txt";

export async function benchGlob(options: { readonly runs: number }): Promise<{ rows: Row[]; notes: string[] }> {
  const tree = await benchTree(options);
  const hostile = await benchHostilePatterns(options);
  return { rows: [...tree.rows, ...hostile.rows], notes: [...tree.notes, ...hostile.notes] };
}

async function benchTree(options: { readonly runs: number }): Promise<{ rows: Row[]; notes: string[] }> {
  const root = makeTemp("glob");
  try {
    const started = nowNs();
    const { workspace, files } = generateTree(root);
    const generatedMs = (nowNs() - started) / 1e6;
    const fileSystem = new NodeWorkspaceFileSystem();
    const tools = new ToolRegistry();
    tools.register(createGlobTool(fileSystem));
    const context = { workspace, identity: "user" };
    const viaTool = async (pattern: string): Promise<string> => {
      const prepared = tools.prepare(toolCall("call_glob", "glob", JSON.stringify({ pattern })));
      if (prepared.error !== undefined) throw new Error(prepared.error.content);
      return (await tools.invoke(prepared, context)).content;
    };
    const fgOptions = { cwd: workspace, followSymbolicLinks: false, onlyFiles: true } as const;
    /** What the tool itself does before its checks: fast-glob's stream, stopped after the cap. */
    const fgStreamFirst = async (pattern: string, limit: number): Promise<number> => {
      let count = 0;
      for await (const entry of fg.stream(pattern, fgOptions)) {
        if (String(entry) !== "") count += 1;
        if (count >= limit) break;
      }
      return count;
    };
    const timed = (work: () => Promise<unknown>) => async (): Promise<number> => {
      const start = nowNs();
      await work();
      return nowNs() - start;
    };

    // What each side found, checked once outside the timings.
    const fewTool = await viaTool("**/needle-*.txt");
    const fewRaw = await fg("**/needle-*.txt", fgOptions);
    const allRaw = await fg("**/*", fgOptions);
    const allTool = await viaTool("**/*");
    const toolCount = allTool.split("\n").filter((line) => !line.startsWith("[")).length;
    const seconds = (generatedMs / 1e3).toFixed(1);
    const notes = [
      `glob: tree of ${files} files (${TOP}×${MIDDLE}×${LEAVES}) and ${LINKS + 1} symlinked folders, made in ${seconds} s; ` +
        `\`**/*\` finds ${allRaw.length} files with raw fast-glob; the tool returns ${toolCount} (its cap) and says so.`,
    ];
    if (fewTool !== NEEDLE || fewRaw.join() !== NEEDLE)
      notes.push(`glob: MISMATCH for the needle: tool ${JSON.stringify(fewTool)}, raw ${JSON.stringify(fewRaw)}`);

    const samples = await rounds(
      {
        fewTool: timed(() => viaTool("**/needle-*.txt")),
        fewRaw: timed(() => fg("**/needle-*.txt", fgOptions)),
        fewStream: timed(() => fgStreamFirst("**/needle-*.txt", Infinity)),
        allTool: timed(() => viaTool("**/*")),
        allRaw: timed(() => fg("**/*", fgOptions)),
        // The tool reads one match past its cap to know that more exist: the fair baseline stops there too.
        allStream: timed(() => fgStreamFirst("**/*", MAX_GLOB_RESULTS + 1)),
      },
      { runs: options.runs, warmup: 1 },
    );
    const fewRatio = ratioOfMedians(samples.fewTool, samples.fewRaw);
    const allFairRatio = ratioOfMedians(samples.allTool, samples.allStream);
    return {
      rows: [
        {
          name: "glob `**/needle-*.txt` (1 match): tool",
          kind: "time",
          value: summarize(samples.fewTool),
          ratio: ratioText(fewRatio, "raw"),
          goal: { text: "≤ 1.2× raw", met: fewRatio <= 1.2 },
        },
        { name: "glob `**/needle-*.txt`: raw fast-glob (array)", kind: "time", value: summarize(samples.fewRaw) },
        {
          name: "glob `**/needle-*.txt`: raw fast-glob.stream",
          kind: "time",
          value: summarize(samples.fewStream),
          ratio: ratioText(ratioOfMedians(samples.fewStream, samples.fewRaw), "raw"),
        },
        {
          name: "glob `**/*`: tool (shows 1,000, reads 1,001)",
          kind: "time",
          value: summarize(samples.allTool),
          ratio: `${ratioText(ratioOfMedians(samples.allTool, samples.allRaw), "raw")}; ${ratioText(allFairRatio, "stream-1001")}`,
          goal: { text: "≤ 1.2× stream-1001", met: allFairRatio <= 1.2 },
        },
        { name: "glob `**/*`: raw fast-glob (array, 100k)", kind: "time", value: summarize(samples.allRaw) },
        {
          name: "glob `**/*`: raw fast-glob.stream, first 1,001",
          kind: "time",
          value: summarize(samples.allStream),
          ratio: ratioText(ratioOfMedians(samples.allStream, samples.allRaw), "raw"),
        },
      ],
      notes,
    };
  } finally {
    removeTemp(root);
  }
}

/** A name as long as a name may be (255 bytes), with no `b` in it: a backtracking matcher tries every split. */
const LONG_NAME = "a".repeat(255);
const ORDINARY = "*.txt";
/** Twelve `*a` and a `b`: picomatch's regex for it backtracks for longer than anyone waits on LONG_NAME. */
const HOSTILE = `${"*a".repeat(12)}*b`;
/** As many `*a` as MAX_GLOB_PATTERN_CHARS allows. */
const LONGEST = `${"*a".repeat(499)}*b`;
/** The matcher's own worst case: a run of 128 `?` placed at each of 128 positions (128 × 128 unit checks). */
const WIDE_RUN = `*${"?".repeat(127)}b*`;

/**
 * The same tool and the same matcher on patterns a backtracking matcher cannot finish, beside an ordinary pattern
 * in the same run: the ratios, not the times, show that matching is linear in the name. Raw fast-glob (the old
 * engine) is timed with one, two and three `*a` only: each one more multiplies its time by about the name's length.
 */
async function benchHostilePatterns(options: { readonly runs: number }): Promise<{ rows: Row[]; notes: string[] }> {
  const root = makeTemp("glob-hostile");
  try {
    const workspace = join(root, "workspace");
    mkdirSync(workspace);
    for (const name of [LONG_NAME, "x.txt"]) closeSync(openSync(join(workspace, name), "w"));
    const fileSystem = new NodeWorkspaceFileSystem();
    const tool = (pattern: string) => async (): Promise<number> => {
      const start = nowNs();
      await fileSystem.globFiles(workspace, pattern);
      return nowNs() - start;
    };
    /** Nanoseconds per match of LONG_NAME, over enough matches to be well above the clock's resolution. */
    const matcher = (pattern: string, times: number) => {
      const glob = compileGlob(pattern);
      return (): Promise<number> => {
        const start = nowNs();
        for (let i = 0; i < times; i += 1) if (matchesPath(glob, LONG_NAME)) throw new Error(`${pattern} matched`);
        return Promise.resolve((nowNs() - start) / times);
      };
    };
    const raw = (pattern: string) => async (): Promise<number> => {
      const start = nowNs();
      await fg(pattern, { cwd: workspace, onlyFiles: true, braceExpansion: false, extglob: false });
      return nowNs() - start;
    };
    const runs = Math.max(options.runs, 5);
    const samples = await rounds(
      {
        toolOrdinary: tool(ORDINARY),
        toolHostile: tool(HOSTILE),
        toolLongest: tool(LONGEST),
        matchOrdinary: matcher(ORDINARY, 20_000),
        matchHostile: matcher(HOSTILE, 20_000),
        matchLongest: matcher(LONGEST, 2_000),
        matchWide: matcher(WIDE_RUN, 2_000),
        rawOrdinary: raw(ORDINARY),
        rawOne: raw(`${"*a".repeat(1)}*b`),
        rawTwo: raw(`${"*a".repeat(2)}*b`),
      },
      { runs, warmup: 1 },
    );
    // Three `*a` take raw fast-glob seconds: fewer rounds, timed apart from the rest.
    const rawThree = await rounds({ rawThree: raw(`${"*a".repeat(3)}*b`) }, { runs: 2, warmup: 0 });
    const versus = (a: readonly number[], b: readonly number[], baseline: string) =>
      ratioText(ratioOfMedians(a, b), baseline);
    const toolRatio = ratioOfMedians(samples.toolHostile, samples.toolOrdinary);
    const matchRatio = ratioOfMedians(samples.matchHostile, samples.matchOrdinary);
    return {
      rows: [
        { name: "glob `*.txt`, 255-char name beside: tool", kind: "time", value: summarize(samples.toolOrdinary) },
        {
          name: "glob `*a*a…*b` (12 `*a`), 255-char name: tool",
          kind: "time",
          value: summarize(samples.toolHostile),
          ratio: versus(samples.toolHostile, samples.toolOrdinary, "`*.txt`"),
          goal: { text: "≤ 2× `*.txt`", met: toolRatio <= 2 },
        },
        {
          name: "glob `*a…*b` (499 `*a`, 1,000 chars): tool",
          kind: "time",
          value: summarize(samples.toolLongest),
          ratio: versus(samples.toolLongest, samples.toolOrdinary, "`*.txt`"),
        },
        { name: "match 255-char name: `*.txt`", kind: "time", value: summarize(samples.matchOrdinary) },
        {
          name: "match 255-char name: `*a*a…*b` (12 `*a`)",
          kind: "time",
          value: summarize(samples.matchHostile),
          ratio: versus(samples.matchHostile, samples.matchOrdinary, "`*.txt`"),
          goal: { text: "≤ 10× `*.txt`", met: matchRatio <= 10 },
        },
        {
          name: "match 255-char name: 499 `*a` (1,000 chars)",
          kind: "time",
          value: summarize(samples.matchLongest),
          ratio: versus(samples.matchLongest, samples.matchOrdinary, "`*.txt`"),
        },
        {
          name: "match 255-char name: `*` + 127 `?` + `b*`",
          kind: "time",
          value: summarize(samples.matchWide),
          ratio: versus(samples.matchWide, samples.matchOrdinary, "`*.txt`"),
        },
        { name: "raw fast-glob `*.txt`, 255-char name beside", kind: "time", value: summarize(samples.rawOrdinary) },
        {
          name: "raw fast-glob `*a*b`, 255-char name",
          kind: "time",
          value: summarize(samples.rawOne),
          ratio: versus(samples.rawOne, samples.rawOrdinary, "raw `*.txt`"),
        },
        {
          name: "raw fast-glob `*a*a*b`, 255-char name",
          kind: "time",
          value: summarize(samples.rawTwo),
          ratio: versus(samples.rawTwo, samples.rawOrdinary, "raw `*.txt`"),
        },
        {
          name: "raw fast-glob `*a*a*a*b`, 255-char name",
          kind: "time",
          value: summarize(rawThree.rawThree),
          ratio: versus(rawThree.rawThree, samples.rawOrdinary, "raw `*.txt`"),
        },
      ],
      notes: [
        "glob hostile: one folder with a 255-character name of `a`s and `x.txt`; the tool and the matcher rows run the " +
          "patterns side by side in the same rounds. Raw fast-glob stops at three `*a`: four take minutes, " +
          "twelve would not finish.",
      ],
    };
  } finally {
    removeTemp(root);
  }
}

/** `workspace/dNNN/sN/fNNN.txt` (empty files), links `workspace/link-N` to folders inside and one to `outside/`. */
function generateTree(root: string): { workspace: string; files: number } {
  const workspace = join(root, "workspace");
  let files = 0;
  for (let top = 0; top < TOP; top += 1) {
    for (let middle = 0; middle < MIDDLE; middle += 1) {
      const folder = join(workspace, `d${String(top).padStart(3, "0")}`, `s${middle}`);
      mkdirSync(folder, { recursive: true });
      for (let leaf = 0; leaf < LEAVES; leaf += 1) {
        const name = `d${String(top).padStart(3, "0")}/s${middle}/f${String(leaf).padStart(4, "0")}.txt`;
        closeSync(openSync(join(workspace, name === "d057/s3/f0042.txt" ? NEEDLE : name), "w"));
        files += 1;
      }
    }
  }
  for (let link = 0; link < LINKS; link += 1) {
    symlinkSync(join(workspace, `d${String(link * 10).padStart(3, "0")}`), join(workspace, `link-${link}`), "dir");
  }
  mkdirSync(join(root, "outside"));
  closeSync(openSync(join(root, "outside", "needle-9999.txt"), "w"));
  symlinkSync(join(root, "outside"), join(workspace, "link-outside"), "dir");
  return { workspace, files };
}
