// glob: the `glob` tool vs raw fast-glob with the same options, on a generated 100k-file tree with symlinks.
import { closeSync, mkdirSync, openSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import fg from "fast-glob";
import { MAX_GLOB_RESULTS, NodeWorkspaceFileSystem } from "../../code/chapters/ch03/src/adapters/filesystem.js";
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
