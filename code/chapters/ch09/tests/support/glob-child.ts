import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

export interface ChildGlob {
  readonly killed: boolean;
  readonly out: string;
}

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const adapterUrl = pathToFileURL(fileURLToPath(new URL("../../src/adapters/filesystem.ts", import.meta.url))).href;

/**
 * Runs one globFiles in a child process, so a pattern that blocks the event loop cannot block the tests.
 * The clock starts when the child has loaded the adapter and says `ready`: only the glob itself is timed.
 */
export function globInChild(ws: string, pattern: string, limitMs: number): Promise<ChildGlob> {
  const script = join(dirname(ws), `glob-${randomBytes(4).toString("hex")}.mts`);
  writeFileSync(
    script,
    [
      `import { NodeWorkspaceFileSystem } from ${JSON.stringify(adapterUrl)};`,
      `const files = new NodeWorkspaceFileSystem();`,
      `process.stdout.write("ready\\n");`,
      `try { process.stdout.write("answered " + JSON.stringify(await files.globFiles(${JSON.stringify(ws)}, ${JSON.stringify(pattern)}))); }`,
      `catch (error) { process.stdout.write("refused " + String(error?.name) + ": " + String(error?.message)); }`,
    ].join("\n"),
  );
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", tsx, script], { stdio: ["ignore", "pipe", "ignore"] });
    let out = "";
    let killed = false;
    let timer: NodeJS.Timeout | undefined;
    const kill = (): void => {
      killed = true;
      child.kill("SIGKILL");
    };
    // Loading tsx on a busy machine is not what is measured, but it may not take forever either.
    const startup = setTimeout(kill, 60_000);
    let answered = false;
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      out += chunk;
      if (timer === undefined && out.startsWith("ready\n")) {
        clearTimeout(startup);
        timer = setTimeout(kill, limitMs);
      }
      // The glob has returned once anything follows "ready": the child's exit, slow on a busy machine, is not timed.
      if (timer !== undefined && !answered && out.length > "ready\n".length) {
        answered = true;
        clearTimeout(timer);
        timer = setTimeout(kill, 60_000);
      }
    });
    child.on("error", reject);
    child.on("close", () => {
      clearTimeout(startup);
      clearTimeout(timer);
      resolve({ killed, out: out.replace(/^ready\n/, "") });
    });
  });
}
