import { spawn, spawnSync, type ChildProcess } from "node:child_process";
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

// -OutputFormat Text: with its output redirected pwsh would otherwise send the error stream as CLIXML, the
// colour codes escaped as `_x001B_`, which no model should have to read.
const PWSH_FLAGS = ["-NoLogo", "-NoProfile", "-NonInteractive", "-OutputFormat", "Text", "-EncodedCommand"];

// UTF-8 both ways, no progress records and no ANSI colours in formatted output (PowerShell 7.2+ colours table
// headers and errors depending on the host), so the model reads the same plain text on every platform.
const PRELUDE =
  "[Console]::OutputEncoding = [System.Text.UTF8Encoding]::new($false); " +
  "$OutputEncoding = [Console]::OutputEncoding; $ProgressPreference = 'SilentlyContinue'; " +
  "if ($PSStyle) { $PSStyle.OutputRendering = 'PlainText' }\n";

/**
 * Credentials stay with the agent: a command the model wrote has no business reading the model's API key.
 * A variable is withheld when its name matches one of these (case does not matter; "part" means a whole
 * `_`-separated part, so PATH is not PAT and PWD, the current folder, is kept while MYSQL_PWD is not).
 */
export const SECRET_NAME_PATTERNS: readonly RegExp[] = [
  // OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, AWS_SESSION_TOKEN, PGPASSWORD, PASSWD, GPG_PASSPHRASE
  /KEY|SECRET|TOKEN|PASSWORD|PASSWD|PASSPHRASE/i,
  // GOOGLE_APPLICATION_CREDENTIALS, AWS_SHARED_CREDENTIALS_FILE, AZURE_CREDENTIAL
  /CREDENTIAL/i,
  // NPM_CONFIG__AUTH, HTTP_AUTHORIZATION, OAUTH_CLIENT, SSH_AUTH_SOCK (it signs in as you); not GIT_AUTHOR_NAME
  /AUTH(?!OR(_|$))/i,
  // SMTP_PASS, PASS_FILE, GITHUB_PAT, GH_PAT, SENTRY_DSN, DATABASE_DSN
  /(^|_)(PASS|PAT|DSN)(_|$)/i,
  // MYSQL_PWD, DB_PWD: only after another part, so PWD (and OLDPWD) stay
  /_PWD(_|$)/i,
  // DATABASE_URL, DB_URL, REDIS_URL, MONGODB_URI, POSTGRES_URL, CLOUDAMQP_URL: connection strings carry passwords
  /(DATABASE|DB|REDIS|MONGO|POSTGRES|MYSQL|AMQP)\w*_UR[LI]$/i,
  // AZURE_STORAGE_CONNECTION_STRING, SQL_CONNSTR
  /CONNECTION_?STRING|CONNSTR/i,
  // SESSION_COOKIE, COOKIE_JAR, PHPSESSID, SESSION, SESSION_ID, APP_SESSIONID
  /COOKIE|SESSID|(^|_)SESSION(_?ID)?$/i,
];

/** A URL with a password in it (`scheme://user:password@host`), whatever the variable is called. */
const URL_WITH_PASSWORD = /[a-z][a-z0-9+.-]*:\/\/[^\s/:@]*:[^\s/@]+@/i;

/** Whether `name=value` looks like a credential: by its name, or by a password in a URL. */
export function isSecretVariable(name: string, value: string | undefined): boolean {
  return SECRET_NAME_PATTERNS.some((pattern) => pattern.test(name)) || URL_WITH_PASSWORD.test(value ?? "");
}

/** The environment a command runs with: the agent's own, minus anything that looks like a credential. */
export function commandEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([name, value]) => !isSecretVariable(name, value)));
}

export interface PowerShellRunnerOptions {
  /** Path of the executable; found with `findPowerShell()` when omitted. */
  readonly executable?: string;
  readonly timeoutMs?: number;
  readonly maxOutputChars?: number;
}

/**
 * Runs each command in a fresh `pwsh -NoLogo -NoProfile -NonInteractive` process, in a process group of its
 * own (POSIX) that is killed when the command ends, times out, or the agent exits: nothing it started in the
 * background outlives it. On Linux a parent-death signal takes the group along even when the agent is SIGKILLed.
 */
export class PowerShellRunner implements CommandRunner {
  constructor(private readonly options: PowerShellRunnerOptions = {}) {}

  run(command: string, cwd: string): Promise<CommandResult> {
    const executable = this.options.executable ?? findPowerShell();
    if (executable === undefined) return Promise.reject(new Error("PowerShell (pwsh) was not found on PATH"));
    // -EncodedCommand carries the script as base64 UTF-16LE: no quoting, no splicing into another shell.
    const encoded = Buffer.from(PRELUDE + command, "utf16le").toString("base64");
    const [file, args] = withParentDeathSignal(executable, [...PWSH_FLAGS, encoded]);
    const timeoutMs = this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const output = new OutputBuffer(this.options.maxOutputChars ?? OUTPUT_CAP_CHARS);

    return new Promise((resolve, reject) => {
      const child = spawn(file, args, {
        cwd,
        env: commandEnvironment(process.env),
        stdio: ["ignore", "pipe", "pipe"],
        // Its own process group on POSIX, so the whole tree can be killed at once.
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
      child.once("exit", (code) => {
        // The command is over, and so is whatever it left running in the background (`&`, Start-Process, nohup).
        if (process.platform !== "win32") killTree(child);
        // A process that left the group may still hold the pipes open; do not wait for it forever.
        setTimeout(() => finish(code), DRAIN_GRACE_MS).unref();
      });
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
  return findExecutable(windows ? ["pwsh.exe", "powershell.exe"] : ["pwsh"], [join(homedir(), ".dotnet", "tools")]);
}

let deathSignalPrefix: readonly string[] | undefined;

/**
 * Kills its whole process group when the kernel says the agent died (SIGTERM from setpriv's parent-death
 * signal), even by SIGKILL, when no exit hook of ours runs. pwsh runs in the background so the trap can
 * interrupt `wait` at once; `wait` hands back its exit code. A shell in between, not pwsh itself, because
 * the .NET global tool `pwsh` is a launcher that starts the real PowerShell as a child of its own.
 */
const GROUP_GUARD = 'trap "kill -KILL 0" TERM; "$@" & wait $!';

/**
 * Linux: `setpriv --pdeathsig TERM -- /bin/sh -c GROUP_GUARD pwsh`, to put in front of pwsh and its
 * arguments; Node cannot call prctl itself. Empty elsewhere, and where util-linux `setpriv` (2.33 or later)
 * or /bin/sh is missing: then pwsh runs without it, and only the agent's exit hook stops its commands.
 */
export function parentDeathGuard(): readonly string[] {
  deathSignalPrefix ??= findParentDeathGuard();
  return deathSignalPrefix;
}

function findParentDeathGuard(): readonly string[] {
  const setpriv = process.platform === "linux" ? findExecutable(["setpriv"]) : undefined;
  if (setpriv === undefined || !isExecutable("/bin/sh")) return [];
  // An older setpriv without --pdeathsig would refuse to start anything.
  const help = spawnSync(setpriv, ["--help"], { encoding: "utf8", timeout: 5_000 });
  const usable = help.error === undefined && help.stdout.includes("--pdeathsig");
  return usable ? [setpriv, "--pdeathsig", "TERM", "--", "/bin/sh", "-c", GROUP_GUARD, "pwsh"] : [];
}

/** `[file, args]` to spawn. Only a pwsh that can run is wrapped: a missing one must fail to spawn as itself. */
function withParentDeathSignal(executable: string, args: readonly string[]): [string, string[]] {
  const [wrapper, ...wrapperArgs] = isExecutable(executable) ? parentDeathGuard() : [];
  return wrapper === undefined ? [executable, [...args]] : [wrapper, [...wrapperArgs, executable, ...args]];
}

function findExecutable(names: readonly string[], extraFolders: readonly string[] = []): string | undefined {
  const folders = [...(process.env.PATH ?? "").split(delimiter).filter(Boolean), ...extraFolders];
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
// Children live in their own process groups, so Ctrl-C on the agent would not reach them. The CLI turns
// SIGINT, SIGTERM and SIGHUP into process.exit, so this runs for those too; synchronously, as exit needs.
process.once("exit", () => liveChildren.forEach((child) => killTree(child, true)));

function killTree(child: ChildProcess, wait = false): void {
  if (child.pid === undefined) return;
  try {
    if (process.platform === "win32") {
      const taskkill = ["/pid", String(child.pid), "/T", "/F"];
      const options = { stdio: "ignore", windowsHide: true } as const;
      if (wait) spawnSync("taskkill", taskkill, options);
      else spawn("taskkill", taskkill, options);
    } else {
      process.kill(-child.pid, "SIGKILL");
    }
  } catch {
    // Already gone.
  }
}
