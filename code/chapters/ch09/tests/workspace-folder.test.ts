import { mkdir, mkdtemp, realpath, rm, symlink } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { dirname, join, parse, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ArgumentError } from "../src/cli/args.js";
import { ConfigurationError } from "../src/config.js";
import { workspaceFolder } from "../src/cli/workspace-folder.js";
import { runCliWithoutTerminal } from "./support/cli-run.js";

// The workspace is everything the model's tools reach. On `/` an unasked read_file of proc/self/environ returned
// the agent's environment, key included; on the home folder, every other project and ~/.ssh.

let folder: string;
let guarded: { home: string; repository: string };
beforeAll(async () => {
  folder = await realpath(await mkdtemp(join(tmpdir(), "workspace-folder-")));
  guarded = { home: join(folder, "users", "reader"), repository: join(folder, "src", "agent-tutorial") };
  await mkdir(join(guarded.home, "project"), { recursive: true });
  await mkdir(join(guarded.repository, "code", "chapters"), { recursive: true });
  await symlink(parse(folder).root, join(folder, "to-root"), "dir");
});
afterAll(async () => {
  await rm(folder, { recursive: true, force: true });
});

function refusal(requested: string): string | undefined {
  try {
    workspaceFolder(requested, folder, guarded);
    return undefined;
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return (error as Error).message;
  }
}

describe("workspaceFolder", () => {
  it.each([
    ["/", "a file system or drive root"],
    ["to-root", "a file system or drive root"],
    ["/proc/self", "a kernel file system"],
    ["/sys", "a kernel file system"],
    ["/dev", "a kernel file system"],
  ])("refuses %s: %s", (requested, why) => {
    if (requested.startsWith("/") && process.platform === "win32") return;
    expect(refusal(requested)).toMatch(new RegExp(` is ${why}: the model's tools would reach everything in it$`));
  });

  it("refuses the home folder and every folder holding it, by real path", () => {
    expect(refusal("users/reader")).toBe(
      `workspace ${guarded.home} is the home folder: the model's tools would reach everything in it`,
    );
    expect(refusal("users/reader/../reader")).toContain("is the home folder");
    expect(refusal("users")).toBe(
      `workspace ${join(folder, "users")} is a folder holding the home folder: the model's tools would reach everything in it`,
    );
    expect(refusal(".")).toContain("is a folder holding the home folder");
  });

  it("refuses a folder holding the agent's repository, and keeps the repository itself, the book's default", () => {
    expect(refusal("src")).toBe(
      `workspace ${join(folder, "src")} is a folder holding the agent's own repository: the model's tools would ` +
        "reach everything in it",
    );
    expect(workspaceFolder("src/agent-tutorial", folder, guarded)).toBe(guarded.repository);
    expect(workspaceFolder("src/agent-tutorial/code/chapters", folder, guarded)).toBe(
      join(guarded.repository, "code", "chapters"),
    );
  });

  it("keeps a project folder inside the home folder, and reports a missing folder as before", () => {
    expect(workspaceFolder("users/reader/project", folder, guarded)).toBe(join(guarded.home, "project"));
    expect(() => workspaceFolder("missing", folder, guarded)).toThrow(
      `workspace ${join(folder, "missing")} does not exist: create it first (New-Item -ItemType Directory 'missing')`,
    );
  });

  it("a missing folder's fix quotes the path as typed for both shells, a quote in it included", () => {
    let thrown: unknown;
    try {
      workspaceFolder("it's new", folder, guarded);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ArgumentError);
    const { message, hint } = thrown as ArgumentError;
    expect({ message, hint }).toEqual({
      message: `workspace ${join(folder, "it's new")} does not exist: create it first (New-Item -ItemType Directory 'it''s new')`,
      hint: "in bash: mkdir -p 'it'\\''s new'",
    });
  });

  it("guards the real home folder and this repository by default", () => {
    expect(() => workspaceFolder(homedir(), folder)).toThrow(ConfigurationError);
    const repository = fileURLToPath(new URL("../../../..", import.meta.url));
    expect(() => workspaceFolder(dirname(repository), folder)).toThrow(ConfigurationError);
    expect(workspaceFolder(repository, folder)).toBe(resolve(repository));
  });
});

describe("the CLI with --workspace /", () => {
  it("stops with one configuration error and its hint, exit 2, before any request", async () => {
    const env = { OPENAI_API_KEY: "sk-test", OPENAI_BASE_URL: "http://127.0.0.1:9/v1", OPENAI_MODEL: "m" };
    const root = parse(folder).root;
    const run = await runCliWithoutTerminal(
      ["run", "--chapter", "1", "--prompt", "read proc/self/environ", "--workspace", root],
      env,
      folder,
    );
    expect(run).toStrictEqual({
      code: 2,
      stdout: "",
      stderr:
        `配置错误: workspace ${root} is a file system or drive root: the model's tools would reach everything in it\n` +
        "  pass --workspace <a project folder>, for example a new folder made for the agent\n",
    });
  });
});
