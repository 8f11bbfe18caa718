import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import type { CommandResult, CommandRunner } from "../core/commands.js";
import { OutputBuffer } from "./output-buffer.js";

export const DEFAULT_TIMEOUT_MS = 120_000;
/** Characters of combined output the model sees; the rest is dropped as it arrives. */
export const OUTPUT_CAP_CHARS = 50_000;
/** How long to wait for the pipes to close once PowerShell itself has exited. */
const DRAIN_GRACE_MS = 1_000;

// UTF-8 both ways and no progress records, so output reads the same on every platform.
const PRELUDE =
  "[Console]::OutputEncoding = [System.Text.UTF8Encoding]::new($false); " +
  "$OutputEncoding = [Console]::OutputEncoding; $ProgressPreference = 'SilentlyContinue'\n";

// Credentials stay with the agent: a command the model wrote has no business reading the model's API key.
const SECRET_NAME = /KEY|SECRET|TOKEN|PASSWORD/i;

/** The environment a command runs with: the agent's own, minus anything named like a credential. */
export function commandEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name]) => !SECRET_NAME.test(name)));
}

export interface PowerShellRunnerOptions {
  /** Path of the executable; found with `findPowerShell()` when omitted. */
  readonly executable?: string;
  readonly timeoutMs?: number;
  readonly maxOutputChars?: number;
}

/** Runs each command in a fresh `pwsh -NoLogo -NoProfile -NonInteractive` process. */
export class PowerShellRunner implements CommandRunner {
  constructor(private readonly options: PowerShellRunnerOptions = {}) {}

  run(command: string, cwd: string): Promise<CommandResult> {
    const executable = this.options.executable ?? findPowerShell();
    if (executable === undefined) return Promise.reject(new Error("PowerShell (pwsh) was not found on PATH"));
    // -EncodedCommand carries the script as base64 UTF-16LE: no quoting, no splicing into another shell.
    const encoded = Buffer.from(PRELUDE + command, "utf16le").toString("base64");
    const args = ["-NoLogo", "-NoProfile", "-NonInteractive", "-EncodedCommand", encoded];
    const timeoutMs = this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const output = new OutputBuffer(this.options.maxOutputChars ?? OUTPUT_CAP_CHARS);

    return new Promise((resolve, reject) => {
      const child = spawn(executable, args, {
        cwd,
        env: commandEnvironment(process.env),
        stdio: ["ignore", "pipe", "pipe"],
        // Its own process group on POSIX, so a timeout can kill the whole tree at once.
        detached: process.platform !== "win32",
        windowsHide: true,
      });
      liveChildren.add(child);
      let timedOut = false;
      let settled = false;
      const finish = (exitCode: number | null): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        liveChildren.delete(child);
        child.stdout.destroy();
        child.stderr.destroy();
        resolve({
          output: withoutFinalLineBreaks(output.text()),
          exitCode: timedOut ? null : exitCode,
          timedOut,
          truncated: output.truncated,
        });
      };

      const timer = setTimeout(() => {
        timedOut = true;
        killTree(child);
      }, timeoutMs);
      child.stdout.on("data", (chunk: Buffer) => output.push(chunk, "stdout"));
      child.stderr.on("data", (chunk: Buffer) => output.push(chunk, "stderr"));
      child.once("error", (error) => {
        if (settled || child.pid !== undefined) return;
        settled = true;
        clearTimeout(timer);
        liveChildren.delete(child);
        reject(new Error(`PowerShell could not be started: ${error.message}`, { cause: error }));
      });
      child.once("close", (code) => finish(code));
      // A background grandchild may hold the pipes open after PowerShell exits; do not wait forever.
      child.once("exit", (code) => setTimeout(() => finish(code), DRAIN_GRACE_MS).unref());
    });
  }
}

/**
 * PowerShell ends every line it writes with a line break; the last ones are layout, not output, so
 * `Write-Output 42` reaches the model as `42`. A loop, not a regex: a flood of line breaks stays linear.
 */
function withoutFinalLineBreaks(text: string): string {
  let end = text.length;
  while (end > 0 && (text[end - 1] === "\n" || text[end - 1] === "\r")) end -= 1;
  return text.slice(0, end);
}

/** `pwsh` on PATH (or as a .NET global tool), else Windows PowerShell on Windows. */
export function findPowerShell(): string | undefined {
  const windows = process.platform === "win32";
  const names = windows ? ["pwsh.exe", "powershell.exe"] : ["pwsh"];
  const folders = (process.env.PATH ?? "").split(delimiter).filter(Boolean);
  folders.push(join(homedir(), ".dotnet", "tools"));
  for (const name of names) {
    for (const folder of folders) {
      const candidate = join(folder, name);
      if (isExecutable(candidate)) return candidate;
    }
  }
  return undefined;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

const liveChildren = new Set<ChildProcess>();
// Children live in their own process groups, so Ctrl-C on the agent would not reach them.
process.once("exit", () => liveChildren.forEach(killTree));

function killTree(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    if (process.platform === "win32") {
      spawn("taskkill", ["/pid", String(child.pid), "/T", "/F"], { stdio: "ignore", windowsHide: true });
    } else {
      process.kill(-child.pid, "SIGKILL");
    }
  } catch {
    // Already gone.
  }
}
