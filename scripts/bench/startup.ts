// start-up: the chapter 3 CLI's `--help` through npm, the built dist entry and tsx, next to `node -e 0`.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { nowNs, ratioOfMedians, rounds, summarize } from "./stats.js";
import { ratioText, type Row } from "./table.js";

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const DIST_ENTRY = "code/chapters/ch03/dist/chapters/ch03.js";
const SRC_ENTRY = "code/chapters/ch03/src/chapters/ch03.ts";
const NPM = process.platform === "win32" ? "npm.cmd" : "npm";

export async function benchStartup(options: { readonly runs: number }): Promise<{ rows: Row[]; notes: string[] }> {
  const notes: string[] = [];
  if (!existsSync(`${REPO}${DIST_ENTRY}`)) {
    // dist/ is git-ignored build output; building only chapter 3 takes a few seconds.
    notes.push(`start-up: ${DIST_ENTRY} was missing; built it with \`npm run build -w @agent-tutorial/ch03\`.`);
    const build = spawnSync(NPM, ["run", "build", "-w", "@agent-tutorial/ch03", "--silent"], {
      cwd: REPO,
      stdio: "inherit",
    });
    if (build.status !== 0) notes.push("start-up: the build failed; run `npm run build` and look at its errors.");
  }
  const scripts = (JSON.parse(readFileSync(`${REPO}package.json`, "utf8")) as { scripts?: Record<string, string> })
    .scripts;
  const commands: Record<string, readonly string[] | undefined> = {
    node: [process.execPath, "-e", "0"],
    npm: scripts?.ch03 === undefined ? undefined : [NPM, "run", "ch03", "--", "--help"],
    dist: existsSync(`${REPO}${DIST_ENTRY}`) ? [process.execPath, DIST_ENTRY, "--help"] : undefined,
    tsx: [process.execPath, "--import", "tsx", SRC_ENTRY, "--help"],
  };
  if (commands.npm === undefined)
    notes.push("start-up: the root package.json has no `ch03` script, so `npm run ch03 -- --help` was skipped.");
  const variants: Record<string, () => Promise<number>> = {};
  for (const [name, command] of Object.entries(commands)) {
    if (command !== undefined) variants[name] = () => timeCommand(command);
  }
  const samples = await rounds(variants, { runs: options.runs, warmup: 1 });
  const row = (key: string, name: string, baseline?: string, baselineName?: string): Row => {
    const values = samples[key];
    if (values === undefined) return { name, kind: "time", note: "skipped (see notes)" };
    const base = baseline === undefined ? undefined : samples[baseline];
    return {
      name,
      kind: "time",
      value: summarize(values),
      ...(base === undefined || baselineName === undefined
        ? {}
        : { ratio: ratioText(ratioOfMedians(values, base), baselineName) }),
    };
  };
  return {
    rows: [
      row("node", "start-up: node -e 0"),
      row("npm", "start-up: npm run ch03 -- --help", "node", "node -e 0"),
      row("dist", "start-up: node dist/chapters/ch03.js --help", "node", "node -e 0"),
      row("tsx", "start-up: node --import tsx src/chapters/ch03.ts --help", "dist", "dist"),
    ],
    notes,
  };
}

/** Wall time of one run; a failing run is an error, not a fast sample. */
function timeCommand(command: readonly string[]): Promise<number> {
  const [executable, ...args] = command as [string, ...string[]];
  return new Promise((resolve, reject) => {
    const start = nowNs();
    const child = spawn(executable, args, { cwd: REPO, stdio: "ignore" });
    child.once("error", reject);
    child.once("close", (code) => {
      if (code === 0) resolve(nowNs() - start);
      else reject(new Error(`${command.join(" ")} exited with ${code}`));
    });
  });
}
