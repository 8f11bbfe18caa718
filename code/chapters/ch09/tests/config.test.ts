import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  ConfigurationError,
  dotEnvInWorkspace,
  loadSettings,
  loadSettingsFrom,
  readDotEnv,
  REQUIRED_SETTINGS,
} from "../src/config.js";

const GOOD = {
  OPENAI_BASE_URL: "https://api.openai.com/v1",
  OPENAI_API_KEY: "sk-test",
  OPENAI_MODEL: "gpt-4.1",
};

/** The ConfigurationError `run()` throws; fails the test when it throws nothing. */
function configurationError(run: () => unknown): ConfigurationError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return error as ConfigurationError;
  }
  throw new Error("expected a ConfigurationError");
}

const folders: string[] = [];
afterEach(async () => {
  await Promise.all(folders.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

/** A new temporary folder whose `.env` holds exactly `bytes`. */
async function folderWithDotEnv(bytes: Buffer): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), "ch01-config-"));
  folders.push(folder);
  await writeFile(join(folder, ".env"), bytes);
  return folder;
}

const DOTENV_TEXT =
  '# settings\nOPENAI_BASE_URL=https://api.example.com/v1\nOPENAI_MODEL=模型-1\r\nOPENAI_API_KEY="sk-quoted"\n';
const DOTENV_VALUES = {
  OPENAI_BASE_URL: "https://api.example.com/v1",
  OPENAI_MODEL: "模型-1",
  OPENAI_API_KEY: "sk-quoted",
};

/** `text` as UTF-16 big-endian bytes (Node has no "utf16be" encoding of its own). */
function utf16be(text: string): Buffer {
  return Buffer.from(text, "utf16le").swap16();
}

describe("loadSettings", () => {
  it("returns the three settings, trimmed", () => {
    expect(
      loadSettings({
        OPENAI_BASE_URL: " https://api.openai.com/v1 ",
        OPENAI_API_KEY: "sk-test\t",
        OPENAI_MODEL: "gpt-4.1",
      }),
    ).toStrictEqual({ baseURL: "https://api.openai.com/v1", apiKey: "sk-test", model: "gpt-4.1" });
  });

  it("needs all three settings and has no default for any of them", () => {
    expect(REQUIRED_SETTINGS).toEqual(["OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"]);
    const error = configurationError(() => loadSettings({}));
    expect(error.message).toBe("Missing required settings: OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL");
    expect(error.hint).toBeUndefined();
    expect(error.name).toBe("ConfigurationError");
  });

  it.each<[Record<string, string>, string]>([
    [{ OPENAI_API_KEY: "k", OPENAI_MODEL: "m" }, "Missing required settings: OPENAI_BASE_URL"],
    [{ OPENAI_BASE_URL: GOOD.OPENAI_BASE_URL, OPENAI_MODEL: "m" }, "Missing required settings: OPENAI_API_KEY"],
    [{ OPENAI_BASE_URL: GOOD.OPENAI_BASE_URL, OPENAI_API_KEY: "k" }, "Missing required settings: OPENAI_MODEL"],
    [{ OPENAI_MODEL: "m" }, "Missing required settings: OPENAI_BASE_URL, OPENAI_API_KEY"],
    [{ OPENAI_API_KEY: "k" }, "Missing required settings: OPENAI_BASE_URL, OPENAI_MODEL"],
    [{ OPENAI_BASE_URL: GOOD.OPENAI_BASE_URL }, "Missing required settings: OPENAI_API_KEY, OPENAI_MODEL"],
  ])("names only the missing settings, in the order BASE_URL, API_KEY, MODEL: %j", (env, message) => {
    expect(configurationError(() => loadSettings(env)).message).toBe(message);
  });

  it.each(["", " ", "\t\n"])("a value of %j counts as missing", (blank) => {
    const env = { OPENAI_BASE_URL: blank, OPENAI_API_KEY: blank, OPENAI_MODEL: blank };
    expect(configurationError(() => loadSettings(env)).message).toBe(
      "Missing required settings: OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL",
    );
  });

  it.each<[string, string]>([
    ["not a url", 'OPENAI_BASE_URL="not a url" is not a URL'],
    ["api.openai.com/v1", 'OPENAI_BASE_URL="api.openai.com/v1" is not a URL'],
    ["ftp://api.example.com/v1", 'OPENAI_BASE_URL="ftp://api.example.com/v1" must start with http:// or https://'],
    [
      "https://api.openai.com/v1/chat/completions",
      'OPENAI_BASE_URL="https://api.openai.com/v1/chat/completions" must not end in /chat/completions (the SDK adds it), e.g. https://api.openai.com/v1',
    ],
    [
      "https://api.openai.com/v1/chat/completions/",
      'OPENAI_BASE_URL="https://api.openai.com/v1/chat/completions/" must not end in /chat/completions (the SDK adds it), e.g. https://api.openai.com/v1',
    ],
  ])("a base URL the SDK cannot use (%s) is refused with the reason, not as a missing setting", (url, reason) => {
    const error = configurationError(() => loadSettings({ ...GOOD, OPENAI_BASE_URL: url }));
    expect(error.message).toBe(reason);
    expect(error.hint).toBeUndefined();
  });

  it("a bad base URL's reason comes first, and the settings really missing follow in the hint, in order", () => {
    const error = configurationError(() => loadSettings({ OPENAI_BASE_URL: "ftp://x" }));
    expect(error.message).toBe('OPENAI_BASE_URL="ftp://x" must start with http:// or https://');
    expect(error.hint).toBe("Missing required settings: OPENAI_API_KEY, OPENAI_MODEL");
  });

  it("quotes at most 200 characters of a bad base URL", () => {
    const url = `ftp://${"a".repeat(500)}`;
    const error = configurationError(() => loadSettings({ ...GOOD, OPENAI_BASE_URL: url }));
    expect(error.message).toBe(`OPENAI_BASE_URL="${url.slice(0, 200)}" must start with http:// or https://`);
  });

  it.each(["http://127.0.0.1:11434/v1", "https://dashscope.aliyuncs.com/compatible-mode/v1"])(
    "accepts an http or https base URL such as %s",
    (url) => {
      expect(loadSettings({ ...GOOD, OPENAI_BASE_URL: url }).baseURL).toBe(url);
    },
  );

  it("drops trailing slashes from the base URL", () => {
    expect(loadSettings({ ...GOOD, OPENAI_BASE_URL: "https://api.openai.com/v1//" }).baseURL).toBe(
      "https://api.openai.com/v1",
    );
  });

  it("--base-url and --model override the environment; the key comes only from the environment", () => {
    const flags = { baseURL: "http://localhost:8000/v1", model: "local-model" };
    expect(loadSettings(GOOD, flags)).toStrictEqual({
      baseURL: "http://localhost:8000/v1",
      apiKey: "sk-test",
      model: "local-model",
    });
    expect(loadSettings({ OPENAI_API_KEY: "k" }, flags)).toStrictEqual({
      baseURL: "http://localhost:8000/v1",
      apiKey: "k",
      model: "local-model",
    });
  });

  it("an empty flag says nothing: the environment's value still counts", () => {
    expect(loadSettings(GOOD, { baseURL: "", model: "  " })).toStrictEqual(loadSettings(GOOD));
  });

  it("a flag is checked like the variable it replaces", () => {
    const error = configurationError(() => loadSettings(GOOD, { baseURL: "https://x/v1/chat/completions" }));
    expect(error.message).toBe(
      'OPENAI_BASE_URL="https://x/v1/chat/completions" must not end in /chat/completions (the SDK adds it), e.g. https://api.openai.com/v1',
    );
    expect(error.hint).toBeUndefined();
  });
});

describe("readDotEnv", () => {
  it.each<[string, Buffer]>([
    ["UTF-8", Buffer.from(DOTENV_TEXT, "utf8")],
    ["UTF-8 with a BOM", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(DOTENV_TEXT, "utf8")])],
    ["UTF-16LE with a BOM", Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(DOTENV_TEXT, "utf16le")])],
    ["UTF-16LE without a BOM", Buffer.from(DOTENV_TEXT, "utf16le")],
    ["UTF-16BE with a BOM", Buffer.concat([Buffer.from([0xfe, 0xff]), utf16be(DOTENV_TEXT)])],
    ["UTF-16BE without a BOM", utf16be(DOTENV_TEXT)],
  ])("reads a .env saved as %s as the text it holds", async (_name, bytes) => {
    expect(readDotEnv(await folderWithDotEnv(bytes))).toStrictEqual(DOTENV_VALUES);
  });

  it("refuses a .env that is neither UTF-8 nor UTF-16, with a hint saying how to save it", async () => {
    const folder = await folderWithDotEnv(Buffer.from("OPENAI_MODEL=caf\xe9\n", "latin1"));
    const error = configurationError(() => readDotEnv(folder));
    expect(error.message).toBe(`${join(folder, ".env")} is neither UTF-8 nor UTF-16 text`);
    expect(error.hint).toBe(
      "save it as UTF-8: in PowerShell, Set-Content .env -Encoding utf8 -Value ..., or in Notepad choose UTF-8",
    );
  });

  it("a folder without a .env has no variables", async () => {
    const folder = await mkdtemp(join(tmpdir(), "ch01-config-"));
    folders.push(folder);
    expect(readDotEnv(folder)).toStrictEqual({});
  });

  it("a .env that cannot be read is a ConfigurationError naming the file", async () => {
    const folder = await mkdtemp(join(tmpdir(), "ch01-config-"));
    folders.push(folder);
    await mkdir(join(folder, ".env"));
    expect(configurationError(() => readDotEnv(folder)).message).toBe(
      `cannot read ${join(folder, ".env")}: EISDIR: illegal operation on a directory, read`,
    );
  });

  it("an empty .env has no variables", async () => {
    expect(readDotEnv(await folderWithDotEnv(Buffer.alloc(0)))).toStrictEqual({});
  });
});

describe("dotEnvInWorkspace", () => {
  it("the default setup: .env in the folder that is also the workspace is reported by its path", async () => {
    const folder = await folderWithDotEnv(Buffer.from("OPENAI_API_KEY=sk-secret\n"));
    expect(dotEnvInWorkspace(folder, folder)).toBe(join(folder, ".env"));
  });

  it("a workspace above the .env's folder (--workspace ..) still holds it", async () => {
    const folder = await folderWithDotEnv(Buffer.from("OPENAI_API_KEY=sk-secret\n"));
    const nested = join(folder, "app");
    await mkdir(nested);
    await writeFile(join(nested, ".env"), "OPENAI_API_KEY=sk-secret\n");
    expect(dotEnvInWorkspace(nested, folder)).toBe(join(nested, ".env"));
  });

  it("a workspace elsewhere, below the .env's folder or beside it with the same prefix does not", async () => {
    const folder = await folderWithDotEnv(Buffer.from("OPENAI_API_KEY=sk-secret\n"));
    const below = join(folder, "project");
    await mkdir(below);
    const elsewhere = await mkdtemp(join(tmpdir(), "ch01-config-"));
    folders.push(elsewhere);
    const beside = `${folder}-2`;
    await mkdir(beside);
    folders.push(beside);
    expect([below, elsewhere, beside].map((workspace) => dotEnvInWorkspace(folder, workspace))).toEqual([
      undefined,
      undefined,
      undefined,
    ]);
  });

  it("no .env, or a folder named .env, is nothing to warn about", async () => {
    const folder = await mkdtemp(join(tmpdir(), "ch01-config-"));
    folders.push(folder);
    expect(dotEnvInWorkspace(folder, folder)).toBeUndefined();
    await mkdir(join(folder, ".env"));
    expect(dotEnvInWorkspace(folder, folder)).toBeUndefined();
  });

  it("compares real paths: a workspace reached through a symbolic link is the same folder", async () => {
    const folder = await folderWithDotEnv(Buffer.from("OPENAI_API_KEY=sk-secret\n"));
    const parent = await mkdtemp(join(tmpdir(), "ch01-config-"));
    folders.push(parent);
    const link = join(parent, "link");
    await symlink(folder, link, "junction");
    expect(dotEnvInWorkspace(folder, link)).toBe(join(folder, ".env"));
  });
});

describe("loadSettingsFrom says where it looked", () => {
  const RULE = "(npm reads .env from the folder it is started in: start it from the repository root)";
  /** The settings of `folder`'s `.env` (none, when it has none), as the CLI reads them: outside the workspace. */
  const dotEnvOf = (folder: string) => ({ path: join(folder, ".env"), values: readDotEnv(folder), inWorkspace: false });

  it("a missing setting's hint names the .env that was read, and the rule to start npm from the repository root", async () => {
    const folder = await folderWithDotEnv(Buffer.from("OPENAI_MODEL=m\n"));
    const error = configurationError(() => loadSettingsFrom({}, dotEnvOf(folder)));
    expect({ message: error.message, hint: error.hint }).toEqual({
      message: "Missing required settings: OPENAI_BASE_URL, OPENAI_API_KEY",
      hint: `looked in the environment and in ${join(folder, ".env")} ${RULE}`,
    });
  });

  it("with no .env, the hint names the folder that has none", async () => {
    const folder = await mkdtemp(join(tmpdir(), "ch01-config-"));
    folders.push(folder);
    const error = configurationError(() => loadSettingsFrom({}, dotEnvOf(folder)));
    expect({ message: error.message, hint: error.hint }).toEqual({
      message: "Missing required settings: OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL",
      hint: `looked in the environment; there is no .env in ${folder} ${RULE}`,
    });
  });

  it("a setting that is there but unusable is not called missing: its reason alone, no hint about where", async () => {
    const folder = await mkdtemp(join(tmpdir(), "ch01-config-"));
    folders.push(folder);
    const error = configurationError(() =>
      loadSettingsFrom({ ...GOOD, OPENAI_BASE_URL: "ftp://x/v1" }, dotEnvOf(folder)),
    );
    expect({ message: error.message, hint: error.hint }).toEqual({
      message: 'OPENAI_BASE_URL="ftp://x/v1" must start with http:// or https://',
      hint: undefined,
    });
  });
});
