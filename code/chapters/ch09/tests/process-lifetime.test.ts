import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { mkdtemp, realpath, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { parentDeathGuard } from "../src/adapters/powershell.js";
import { eventually, isAlive, killQuietly, readPid } from "./support/processes.js";
import { powershell } from "./support/powershell.js";

// Every process the agent starts stops with it when the agent itself is interrupted, hung up on, terminated or
// (on Linux) killed outright. That a command's processes stop when it ends or times out is the runner's own
// business, checked in powershell-runner.test.ts.
const posix = process.platform !== "win32";

let workspace: string;
/** Every pid a test learned, killed with its group afterwards, so a failing test leaves no sleeper behind. */
let started: (number | undefined)[];
beforeEach(async () => {
  workspace = await realpath(await mkdtemp(join(tmpdir(), "process-lifetime-")));
  started = [];
});
afterEach(async () => {
  started.forEach(killQuietly);
  await rm(workspace, { recursive: true, force: true });
});

/** The pid in `<workspace>/<name>` once the command has written it. */
async function pidFile(name: string): Promise<number> {
  const path = join(workspace, name);
  await eventually(() => readPid(path) !== undefined, `${name} to be written`);
  const pid = readPid(path) as number;
  started.push(pid);
  return pid;
}

const tsx = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href;
const cliChild = fileURLToPath(new URL("./support/cli-child.ts", import.meta.url));
/** Our environment without model settings or npm's INIT_CWD: the run replays a transcript. */
const cleanEnv: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_") && key !== "INIT_CWD"),
);
/** pwsh writes its own pid, then starts sh, which starts a sleeper, writes its pid and waits on it. */
const SLEEPER_COMMAND =
  "Set-Content -Path pwsh.pid -Value $PID; sh -c 'sleep 300 & echo $! > sleeper.tmp; mv sleeper.tmp sleeper.pid; wait'";

interface Agent {
  readonly child: ChildProcessWithoutNullStreams;
  readonly stderr: () => string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The CLI replaying one shell call of `SLEEPER_COMMAND`, approved on its stdin once it asks. */
async function startAgent(): Promise<Agent> {
  const transcript = join(workspace, "sleeper.json");
  const call = { id: "call_sleep", type: "function", function: { name: "shell", arguments: "" } };
  call.function.arguments = JSON.stringify({ command: SLEEPER_COMMAND });
  const messages = [
    { role: "user", content: "start a sleeper" },
    { role: "assistant", content: null, tool_calls: [call] },
    { role: "assistant", content: "done" },
  ];
  await writeFile(transcript, JSON.stringify({ chapter: 1, messages }));
  const args = ["--import", tsx, cliChild, "run", "--chapter", "1", "--replay", transcript, "--workspace", workspace];
  const child = spawn(process.execPath, args, { cwd: workspace, env: cleanEnv, stdio: "pipe" });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk));
  child.stdout.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  await eventually(() => stderr.includes("[y/N]"), "the approval question");
  child.stdin.write("y\n");
  return { child, stderr: () => stderr, exited };
}

describe.skipIf(powershell === undefined || !posix)("the agent stopped while an approved command runs", () => {
  it.each<[NodeJS.Signals, number]>([
    ["SIGINT", 130],
    ["SIGTERM", 143],
    ["SIGHUP", 129],
  ])(
    "%s ends the agent with exit %i, and the command and its children are gone",
    async (signal, exitCode) => {
      const agent = await startAgent();
      const pwsh = await pidFile("pwsh.pid");
      const sleeper = await pidFile("sleeper.pid");
      expect([isAlive(pwsh), isAlive(sleeper)]).toEqual([true, true]);

      agent.child.kill(signal);

      expect(await agent.exited).toEqual({ code: exitCode, signal: null });
      const interrupted = agent.stderr().endsWith("已中断，正在停止本次运行启动的所有命令。\n");
      expect(interrupted).toBe(signal === "SIGINT");
      await eventually(() => !isAlive(pwsh) && !isAlive(sleeper), `pwsh ${pwsh} and sleeper ${sleeper} to be gone`);
    },
    90_000,
  );

  // No exit hook runs after SIGKILL: only the kernel's parent-death signal (setpriv) can stop the command then.
  it.skipIf(process.platform !== "linux" || parentDeathGuard().length === 0)(
    "SIGKILL of the agent on Linux still takes the command and its children along (parent-death signal)",
    async () => {
      const agent = await startAgent();
      const pwsh = await pidFile("pwsh.pid");
      const sleeper = await pidFile("sleeper.pid");

      agent.child.kill("SIGKILL");

      expect(await agent.exited).toEqual({ code: null, signal: "SIGKILL" });
      await eventually(() => !isAlive(pwsh) && !isAlive(sleeper), `pwsh ${pwsh} and sleeper ${sleeper} to be gone`);
    },
    90_000,
  );
});
