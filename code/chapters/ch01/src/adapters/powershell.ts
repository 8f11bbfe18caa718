import { spawn, type ChildProcess } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { homedir } from "node:os";
import { delimiter, join } from "node:path";
import {
  CommandStartError,
  type CommandRequest,
  type CommandResult,
  type CommandRunner,
} from "../core/command-runner.js";
import { OutputBuffer } from "./output-buffer.js";
import { OutputFile } from "./output-file.js";

export const DEFAULT_TIMEOUT_MS = 120_000;
export const OUTPUT_CAP_BYTES = 50 * 1024;
/** Output saved to `fullOutputPath` stops here: a command printing forever must not fill the disk. */
export const SAVED_OUTPUT_CAP_BYTES = 1024 * 1024 * 1024;
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
  readonly maxOutputBytes?: number;
  readonly maxSavedOutputBytes?: number;
}

/** Runs each command in a fresh `pwsh -NoLogo -NoProfile -NonInteractive` process. */
export class PowerShellRunner implements CommandRunner {
  constructor(private readonly options: PowerShellRunnerOptions = {}) {}

  run(request: CommandRequest): Promise<CommandResult> {
    const executable = this.options.executable ?? findPowerShell();
    if (executable === undefined) {
      return Promise.reject(new CommandStartError("PowerShell (pwsh) was not found on PATH"));
    }
    // -EncodedCommand carries the script as base64 UTF-16LE: no quoting, no splicing into another shell.
    const encoded = Buffer.from(PRELUDE + request.command, "utf16le").toString("base64");
    const args = ["-NoLogo", "-NoProfile", "-NonInteractive", "-EncodedCommand", encoded];
    const timeoutMs = request.timeoutMs ?? this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const output = new OutputBuffer(this.options.maxOutputBytes ?? OUTPUT_CAP_BYTES);

    return new Promise((resolve, reject) => {
      const child = spawn(executable, args, {
        cwd: request.cwd,
        env: commandEnvironment(process.env),
        stdio: ["ignore", "pipe", "pipe"],
        // Its own process group on POSIX, so a timeout can kill the whole tree at once.
        detached: process.platform !== "win32",
        windowsHide: true,
      });
      liveChildren.add(child);
      let timedOut = false;
      let settled = false;
      let file: OutputFile | undefined;
      const finish = (exitCode: number | null): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        liveChildren.delete(child);
        child.stdout.destroy();
        child.stderr.destroy();
        const result = {
          output: output.text(),
          exitCode: timedOut ? null : exitCode,
          timedOut,
          truncated: output.truncated,
        };
        void (file?.close() ?? Promise.resolve(undefined)).then((saved) =>
          resolve(saved === undefined ? result : { ...result, savedOutput: saved }),
        );
      };
      const onData = (chunk: Buffer): void => {
        // The first chunk that no longer fits starts the file with everything kept so far.
        if (file === undefined && request.fullOutputPath !== undefined && output.wouldOverflow(chunk.length)) {
          const cap = this.options.maxSavedOutputBytes ?? SAVED_OUTPUT_CAP_BYTES;
          file = new OutputFile(request.fullOutputPath, cap, request.cwd);
          file.write(output.contents());
        }
        output.push(chunk);
        if (file !== undefined && !file.write(chunk)) {
          // The disk is behind: stop reading, so the pipe fills and PowerShell waits, instead of memory growing.
          child.stdout.pause();
          child.stderr.pause();
          file.drained(() => {
            child.stdout.resume();
            child.stderr.resume();
          });
        }
      };
      const timer = setTimeout(() => {
        timedOut = true;
        killTree(child);
      }, timeoutMs);
      child.stdout.on("data", onData);
      child.stderr.on("data", onData);
      child.once("error", (error) => {
        if (settled || child.pid !== undefined) return;
        settled = true;
        clearTimeout(timer);
        liveChildren.delete(child);
        reject(new CommandStartError(`PowerShell could not be started: ${error.message}`));
      });
      child.once("close", (code) => finish(code));
      // A background grandchild may hold the pipes open after PowerShell exits; do not wait forever.
      child.once("exit", (code) => setTimeout(() => finish(code), DRAIN_GRACE_MS).unref());
    });
  }
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
