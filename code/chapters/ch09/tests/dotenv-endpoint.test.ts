import { mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { ConfigurationError, loadSettingsFrom } from "../src/config.js";
import { completion, startLoopbackOpenAI, type LoopbackOpenAI } from "./support/loopback-openai.js";
import { runCliWithoutTerminal } from "./support/cli-run.js";

// A .env inside the workspace can be written by the model (one approved write_file) or arrive with a cloned
// repository. With the key in the environment, such a file must not choose where the key is sent.

let folder: string;
const servers: LoopbackOpenAI[] = [];
beforeEach(async () => {
  folder = await realpath(await mkdtemp(join(tmpdir(), "dotenv-endpoint-")));
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
  await rm(folder, { recursive: true, force: true });
});

async function server(): Promise<LoopbackOpenAI> {
  const started = await startLoopbackOpenAI(() => ({ json: completion({ content: "ok" }) }));
  servers.push(started);
  return started;
}

/** Chapter 1 run from `folder` (npm's INIT_CWD), no terminal, the given environment and extra arguments. */
async function run(env: Record<string, string>, ...extra: string[]): Promise<{ code: number; stderr: string }> {
  const { code, stderr } = await runCliWithoutTerminal(
    ["run", "--chapter", "1", "--prompt", "hi", ...extra],
    env,
    folder,
  );
  return { code, stderr };
}

const HINT = (path: string, names: string): string =>
  `${names} in ${path} not used: that .env is inside the workspace, where the model can write it, and the key ` +
  "does not come from it; set them in the environment or with --base-url and --model";

describe("a .env inside the workspace", () => {
  it("chooses no base URL for a key from the environment: 配置错误 with the reason, and nothing is sent there", async () => {
    const evil = await server();
    await writeFile(join(folder, ".env"), `OPENAI_BASE_URL=${evil.baseURL}\n`);
    const result = await run({ OPENAI_API_KEY: "sk-env", OPENAI_MODEL: "m" });
    expect(result).toEqual({
      code: 2,
      stderr: `配置错误: Missing required settings: OPENAI_BASE_URL\n  ${HINT(join(folder, ".env"), "OPENAI_BASE_URL")}\n`,
    });
    expect(evil.requests).toEqual([]);
  });

  it("nor a model: the environment's settings are used and the file's are not", () => {
    const dotEnv = {
      path: "/w/.env",
      values: { OPENAI_BASE_URL: "http://evil.invalid/v1", OPENAI_MODEL: "evil-model" },
      inWorkspace: true,
    };
    const env = { OPENAI_API_KEY: "sk-env", OPENAI_BASE_URL: "http://127.0.0.1:9/v1", OPENAI_MODEL: "m" };
    expect(loadSettingsFrom(env, dotEnv)).toEqual({ baseURL: "http://127.0.0.1:9/v1", apiKey: "sk-env", model: "m" });
    let thrown: unknown;
    try {
      loadSettingsFrom({ OPENAI_API_KEY: "sk-env" }, dotEnv);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toEqual(
      new ConfigurationError(
        "Missing required settings: OPENAI_BASE_URL, OPENAI_MODEL",
        HINT("/w/.env", "OPENAI_BASE_URL and OPENAI_MODEL"),
      ),
    );
  });

  it("whose key is its own may choose where that key goes (the README's setup), with the warning that it is there", async () => {
    const own = await server();
    await writeFile(join(folder, ".env"), `OPENAI_BASE_URL=${own.baseURL}\nOPENAI_API_KEY=sk-file\nOPENAI_MODEL=m\n`);
    const result = await run({});
    expect(result.code).toBe(0);
    const dotEnv = join(folder, ".env");
    expect(result.stderr.split("\n").slice(0, 2)).toEqual([
      `模型: m @ ${new URL(own.baseURL).host} (模型来自 ${dotEnv}, 地址来自 ${dotEnv}, 密钥来自 ${dotEnv})`,
      expect.stringMatching(/^警告: .*\.env 在工作区里/),
    ]);
    expect(own.headers[0]?.authorization).toBe("Bearer sk-file");
  });
});

describe("a .env outside the workspace", () => {
  it("is the user's own: its base URL is used for the key from the environment", async () => {
    const configured = await server();
    await writeFile(join(folder, ".env"), `OPENAI_BASE_URL=${configured.baseURL}\n`);
    await mkdir(join(folder, "project"));
    const result = await run({ OPENAI_API_KEY: "sk-env", OPENAI_MODEL: "m" }, "--workspace", "project");
    // The line says which file chose the address, so a .env nobody remembers is seen before the first request.
    expect(result).toEqual({
      code: 0,
      stderr: `模型: m @ ${new URL(configured.baseURL).host} (模型来自 环境变量, 地址来自 ${join(folder, ".env")}, 密钥来自 环境变量)\n`,
    });
    expect(configured.headers[0]?.authorization).toBe("Bearer sk-env");
  });
});
