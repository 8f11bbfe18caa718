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
 * Names of the variables a command is given; every other variable stays with the agent. An allow-list, not a
 * list of secret-sounding names: a credential can be called anything (`MY_VAR`, `NOTIFY`, `SIGNING`, `DB_PW`),
 * and a command the model wrote has no business reading the model's API key or any other key of yours. Names
 * are compared without regard to ASCII case, as Windows compares them (`Path` there is PATH).
 */
export const COMMAND_ENVIRONMENT_NAMES: readonly string[] = [
  // Where programs are, whose home it is, who is running: what `git`, `npm` or `Get-ChildItem ~` need to start.
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  // Locale and time zone: text is decoded and dates are printed as the user's own terminal does.
  "LANG",
  "LANGUAGE",
  "LC_ALL",
  "LC_ADDRESS",
  "LC_COLLATE",
  "LC_CTYPE",
  "LC_IDENTIFICATION",
  "LC_MEASUREMENT",
  "LC_MESSAGES",
  "LC_MONETARY",
  "LC_NAME",
  "LC_NUMERIC",
  "LC_PAPER",
  "LC_TELEPHONE",
  "LC_TIME",
  "TZ",
  // Temporary files go where the user put them, not into a folder that may not exist or be shared.
  "TMPDIR",
  "TEMP",
  "TMP",
  // The terminal's kind and size, and the user's wish for no colours, for tools that format their output.
  "TERM",
  "COLORTERM",
  "NO_COLOR",
  "COLUMNS",
  "LINES",
  // XDG base folders: where tools keep their configuration, data and caches on Linux.
  "XDG_CONFIG_HOME",
  "XDG_CONFIG_DIRS",
  "XDG_DATA_HOME",
  "XDG_DATA_DIRS",
  "XDG_CACHE_HOME",
  "XDG_STATE_HOME",
  "XDG_RUNTIME_DIR",
  // A proxy and the certificates to trust behind it: without them no download works on a corporate network.
  // A proxy URL with a password in it is still withheld by its value.
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "ALL_PROXY",
  "NO_PROXY",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  // PowerShell's own: where its modules are, and the user's opt-out of its telemetry and update check.
  "PSModulePath",
  "PSModuleAnalysisCachePath",
  "POWERSHELL_TELEMETRY_OPTOUT",
  "POWERSHELL_UPDATECHECK",
  "POWERSHELL_DISTRIBUTION_CHANNEL",
  // The .NET runtime pwsh runs on: a pwsh installed as a .NET global tool (~/.dotnet/tools) finds it through
  // DOTNET_ROOT when it is not in the default place, and a machine without ICU needs invariant globalization.
  "DOTNET_ROOT",
  "DOTNET_ROOT(x86)",
  "DOTNET_ROOT_X86",
  "DOTNET_ROOT_X64",
  "DOTNET_ROOT_ARM64",
  "DOTNET_SYSTEM_GLOBALIZATION_INVARIANT",
  // Windows' own: without SystemRoot sockets and cryptography fail, ComSpec is the cmd.exe that tools start,
  // PATHEXT is how a bare `git` finds git.exe, and the rest are the user's and the machine's folders and facts.
  "SystemRoot",
  "windir",
  "SystemDrive",
  "ComSpec",
  "PATHEXT",
  "OS",
  "ProgramFiles",
  "ProgramFiles(x86)",
  "ProgramW6432",
  "CommonProgramFiles",
  "CommonProgramFiles(x86)",
  "CommonProgramW6432",
  "ProgramData",
  "ALLUSERSPROFILE",
  "PUBLIC",
  "APPDATA",
  "LOCALAPPDATA",
  "USERPROFILE",
  "USERNAME",
  "USERDOMAIN",
  "COMPUTERNAME",
  "HOMEDRIVE",
  "HOMEPATH",
  "NUMBER_OF_PROCESSORS",
  "PROCESSOR_ARCHITECTURE",
  "PROCESSOR_ARCHITEW6432",
  "PROCESSOR_IDENTIFIER",
  "PROCESSOR_LEVEL",
  "PROCESSOR_REVISION",
];

/**
 * Values that are credentials whatever the variable is called. An allowed name can still carry one (a proxy
 * with a password, a key pasted into the wrong variable), so each allowed value is checked against these. Each
 * one stays linear on a long value: a scheme is at most 32 characters, a token starts where a word does.
 */
export const CREDENTIAL_VALUE_PATTERNS: readonly RegExp[] = [
  // A URL with a password in it: postgres://app:hunter2@db, http://me:pw@proxy:8080
  /[a-z][a-z0-9+.-]{0,31}:\/\/[^\s/:@]*:[^\s/@]+@/i,
  // A URL whose user part is a token: https://ghp_…@github.com/…, 16 characters or more with a digit in them
  // (git@ and user@ are names, not tokens)
  /[a-z][a-z0-9+.-]{0,31}:\/\/(?=[^\s/:@]*\d)[^\s/:@]{16,}@/i,
  // An HTTP bearer token, with or without the `Authorization:` in front of it
  /\bBearer\s+\S/i,
  // A JSON Web Token: a base64url header and payload that both begin `{"`
  /(?<![\w-])eyJ[\w-]*\.eyJ[\w-]*\./,
  // A PEM private key of any kind: RSA, EC, OPENSSH, ENCRYPTED, PGP's key block
  /-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----/,
  // A password or key in a connection string: Server=x;Password=y, Pwd=, Azure's AccountKey= and SharedAccessKey=
  /(?:^|[;\s])(?:Password|Pwd|AccountKey|SharedAccessKey)\s*=/i,
  // .npmrc text: //registry.npmjs.org/:_authToken=…, _auth=…, _password=…
  /\b_(?:authToken|auth|password)\s*=/i,
];

const ALLOWED_NAMES = new Set(COMMAND_ENVIRONMENT_NAMES.map((name) => name.toUpperCase()));

/** Whether `value` looks like a credential, by one of CREDENTIAL_VALUE_PATTERNS. */
export function looksLikeCredential(value: string): boolean {
  return CREDENTIAL_VALUE_PATTERNS.some((pattern) => pattern.test(value));
}

/**
 * Whether a command is given `name=value`: its name is one of COMMAND_ENVIRONMENT_NAMES and its value does not
 * look like a credential. Only ASCII case is ignored: JavaScript would upper-case `ſHELL` into SHELL.
 */
function isCommandVariable(name: string, value: string): boolean {
  return /^[\x21-\x7e]+$/.test(name) && ALLOWED_NAMES.has(name.toUpperCase()) && !looksLikeCredential(value);
}

/** The environment a command runs with: what it needs from the agent's own, and no credential. */
export function commandEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const kept: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && isCommandVariable(name, value)) kept[name] = value;
  }
  return kept;
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
