import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, relative, sep } from "node:path";
import { parseEnv } from "node:util";

/** A setting that is missing or unusable: exit code 2, and the model is never contacted. */
export class ConfigurationError extends Error {
  override readonly name = "ConfigurationError";
  /** A second line for the reader: how to fix it, when the first line alone does not say. */
  readonly hint: string | undefined;

  constructor(message: string, hint?: string) {
    super(message);
    this.hint = hint;
  }
}

/** The three settings every real run needs. None has a default: a silent default hides a wrong model. */
export interface Settings {
  readonly baseURL: string;
  readonly apiKey: string;
  readonly model: string;
}

export const REQUIRED_SETTINGS = ["OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"] as const;

/** The book's words before the names of the settings that are missing. */
const MISSING = "Missing required settings: ";

type Environment = Readonly<Record<string, string | undefined>>;

// eslint-disable-next-line no-control-regex -- control characters are exactly what a key must not hold
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Reads the three settings, flags first (`--base-url`, `--model`), then the environment. A base URL
 * the SDK cannot use is refused with the reason why, before any setting that is missing.
 */
export function loadSettings(env: Environment, flags: { baseURL?: string; model?: string } = {}): Settings {
  // An empty flag (`--model ""`) says nothing, so the environment still counts.
  const value = (flag: string | undefined, name: string): string => (flag?.trim() || env[name] || "").trim();
  const baseURL = value(flags.baseURL, "OPENAI_BASE_URL");
  const apiKey = value(undefined, "OPENAI_API_KEY");
  const model = value(flags.model, "OPENAI_MODEL");
  const urlProblem = baseURL === "" ? undefined : baseUrlProblem(baseURL);
  const usable = {
    OPENAI_BASE_URL: baseURL !== "" && urlProblem === undefined,
    OPENAI_API_KEY: apiKey !== "",
    OPENAI_MODEL: model !== "",
  };
  const missing = REQUIRED_SETTINGS.filter((name) => !usable[name]);
  // A base URL that is set but unusable is not missing: its reason comes first, anything really missing after it.
  if (urlProblem !== undefined) {
    const others = missing.filter((name) => name !== "OPENAI_BASE_URL");
    throw new ConfigurationError(urlProblem, others.length > 0 ? `${MISSING}${others.join(", ")}` : undefined);
  }
  if (missing.length > 0) throw new ConfigurationError(`${MISSING}${missing.join(", ")}`);
  // A key with a line break (a .env pasted across two lines) would reach an HTTP header, and the transport's
  // complaint about that header quotes it: refuse it here, and never echo it.
  if (CONTROL_CHARACTER.test(apiKey)) {
    throw new ConfigurationError(
      "OPENAI_API_KEY contains a line break or another control character (the key is not shown)",
      "put the whole key on one line in .env or the environment",
    );
  }
  // One spelling per endpoint: `…/v1/` and `…/v1` are the same base URL.
  return { baseURL: baseURL.replace(/\/+$/, ""), apiKey, model };
}

/** The settings of a `.env` file, and whether the model can write that file (it lies inside the workspace). */
export interface DotEnvFile {
  readonly path: string;
  readonly values: Readonly<Record<string, string>>;
  readonly inWorkspace: boolean;
}

/** Where a setting may point the key: a `.env` the model can write may not choose it for a key from elsewhere. */
const ENDPOINT_SETTINGS = ["OPENAI_BASE_URL", "OPENAI_MODEL"] as const;

/**
 * `loadSettings` over the environment and a `.env` file (the environment wins). A `.env` inside the workspace
 * can be written by the model with one approved `write_file`, or come with a cloned repository: unless the key
 * comes from that same file, its base URL and model are not taken, so it cannot send a key from elsewhere to an
 * address of its choosing. A setting missing for that reason says so in the hint.
 */
export function loadSettingsFrom(
  env: Environment,
  dotEnv: DotEnvFile,
  flags: { baseURL?: string; model?: string } = {},
): Settings {
  const keyFromFile = (env.OPENAI_API_KEY ?? "").trim() === "" && (dotEnv.values.OPENAI_API_KEY ?? "") !== "";
  const untrusted = dotEnv.inWorkspace && !keyFromFile;
  const ignored = untrusted ? ENDPOINT_SETTINGS.filter((name) => dotEnv.values[name] !== undefined) : [];
  const fileValues = Object.fromEntries(
    Object.entries(dotEnv.values).filter(([name]) => !(ignored as readonly string[]).includes(name)),
  );
  try {
    return loadSettings({ ...fileValues, ...definedValues(env) }, flags);
  } catch (error) {
    if (!(error instanceof ConfigurationError) || error.hint !== undefined) throw error;
    if (ignored.length === 0) {
      if (!error.message.startsWith(MISSING)) throw error;
      throw new ConfigurationError(error.message, whereLooked(dotEnv.path));
    }
    throw new ConfigurationError(
      error.message,
      `${ignored.join(" and ")} in ${dotEnv.path} not used: that .env is inside the workspace, where the model can ` +
        "write it, and the key does not come from it; set them in the environment or with --base-url and --model",
    );
  }
}

/**
 * Where a missing setting was looked for: the environment and the `.env` that was read, or the folder that had
 * none. The usual cause is npm started in another folder (INIT_CWD), so the line names that rule too.
 */
function whereLooked(path: string): string {
  const where = existsSync(path)
    ? `looked in the environment and in ${path}`
    : `looked in the environment; there is no .env in ${dirname(path)}`;
  return `${where} (npm reads .env from the folder it is started in: start it from the repository root)`;
}

/** Where each setting of a real run came from: a flag, the environment, or the path of the `.env` file. */
export interface SettingSources {
  readonly baseURL: string;
  readonly apiKey: string;
  readonly model: string;
}

/** The sources `loadSettingsFrom` used, in its order: a flag first, then the environment, then the `.env` file. */
export function settingSources(
  env: Environment,
  dotEnv: DotEnvFile,
  flags: { baseURL?: string; model?: string } = {},
): SettingSources {
  const source = (name: string, flag: string | undefined, flagName: string): string => {
    if ((flag?.trim() ?? "") !== "") return flagName;
    return (env[name] ?? "").trim() !== "" ? "环境变量" : dotEnv.path;
  };
  return {
    baseURL: source("OPENAI_BASE_URL", flags.baseURL, "--base-url"),
    apiKey: source("OPENAI_API_KEY", undefined, ""),
    model: source("OPENAI_MODEL", flags.model, "--model"),
  };
}

function definedValues(env: Environment): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

/** Why the SDK could not use this base URL, or `undefined` when it can. */
function baseUrlProblem(text: string): string | undefined {
  const shown = JSON.stringify(text.slice(0, 200));
  if (!URL.canParse(text)) return `OPENAI_BASE_URL=${shown} is not a URL`;
  const url = new URL(text);
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    return `OPENAI_BASE_URL=${shown} must start with http:// or https://`;
  }
  // The SDK appends /chat/completions itself; a URL that has it already would ask for it twice.
  if (/\/chat\/completions\/?$/.test(url.pathname)) {
    return `OPENAI_BASE_URL=${shown} must not end in /chat/completions (the SDK adds it), e.g. https://api.openai.com/v1`;
  }
  return undefined;
}

/**
 * The variables of `<folder>/.env`, or none when there is no such file. Windows PowerShell 5.1
 * writes UTF-16 (`Out-File`, `>`) and Notepad may add a BOM: all of these are read as the text they hold.
 */
export function readDotEnv(folder: string): Record<string, string> {
  const path = join(folder, ".env");
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new ConfigurationError(`cannot read ${path}: ${(error as Error).message}`);
  }
  const text = decodeText(bytes);
  if (text === undefined) {
    throw new ConfigurationError(
      `${path} is neither UTF-8 nor UTF-16 text`,
      "save it as UTF-8: in PowerShell, Set-Content .env -Encoding utf8 -Value ..., or in Notepad choose UTF-8",
    );
  }
  return parseEnv(text) as Record<string, string>;
}

/**
 * The path of `<folder>/.env` when that file exists inside `workspace` (real paths compared), else
 * `undefined`. There the model's tools can read every key in it; the default setup is exactly that.
 */
export function dotEnvInWorkspace(folder: string, workspace: string): string | undefined {
  const path = join(folder, ".env");
  let from: string;
  try {
    if (!statSync(path).isFile()) return undefined;
    from = relative(realpathSync.native(workspace), realpathSync.native(folder));
  } catch {
    return undefined;
  }
  return isAbsolute(from) || from.split(sep)[0] === ".." ? undefined : path;
}

/** `bytes` as text: UTF-8 (a BOM dropped) or UTF-16 (BOM or not), else `undefined`; `--prompt-file` reads this way too. */
export function decodeText(bytes: Buffer): string | undefined {
  const [first, second] = [bytes[0], bytes[1]];
  let encoding = "utf-8";
  if (first === 0xff && second === 0xfe) encoding = "utf-16le";
  else if (first === 0xfe && second === 0xff) encoding = "utf-16be";
  // UTF-16 without a BOM: ASCII names leave every other byte zero.
  else if (bytes.length >= 2 && second === 0 && first !== 0) encoding = "utf-16le";
  else if (bytes.length >= 2 && first === 0 && second !== 0) encoding = "utf-16be";
  try {
    // TextDecoder drops the BOM of its own encoding; `fatal` turns bad bytes into an error instead of U+FFFD.
    return new TextDecoder(encoding, { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
}
