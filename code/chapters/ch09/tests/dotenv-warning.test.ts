import { mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { runCli, type CliIO } from "../src/cli.js";
import { completion, startLoopbackOpenAI, type LoopbackOpenAI } from "./support/loopback-openai.js";
import { Sink } from "./support/sink.js";

// The CLI reads .env from the folder npm ran in, which is also the default workspace: the keys sit where
// the model's tools can read them. It says so once, on stderr, naming the file and never a value.
const KEY = "sk-secret-must-not-be-printed";

function warning(path: string): string {
  return `警告: ${path} 在工作区里, 模型可以用工具读到其中的密钥; 把 .env 放到工作区外, 或用 --workspace 指定别的文件夹。\n`;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((cleanup) => cleanup()));
});

async function tempFolder(): Promise<string> {
  const folder = await realpath(await mkdtemp(join(tmpdir(), "dotenv-warning-")));
  cleanups.push(() => rm(folder, { recursive: true, force: true }));
  return folder;
}

async function answeringServer(): Promise<LoopbackOpenAI> {
  const server = await startLoopbackOpenAI(() => ({ json: completion({ content: "done" }) }));
  cleanups.push(() => server.close());
  return server;
}

/** `run --chapter 1 …` in this process, with no terminal, the given environment and folder. */
async function run(argv: readonly string[], env: CliIO["env"], cwd: string) {
  const stdout = new Sink();
  const stderr = new Sink();
  const stdin = new PassThrough();
  stdin.end();
  const io: CliIO = { env, cwd, stdin, stdinIsTTY: false, stdout, stderr, stderrIsTTY: false };
  const code = await runCli(["run", "--chapter", "1", ...argv], io);
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/** The first line of a run whose three settings all come from the `.env` file at `path`. */
function settingsLine(server: LoopbackOpenAI, path: string): string {
  return `模型: loopback-model @ ${new URL(server.baseURL).host} (模型来自 ${path}, 地址来自 ${path}, 密钥来自 ${path})`;
}

async function folderWithSettings(server: LoopbackOpenAI): Promise<string> {
  const folder = await tempFolder();
  await writeFile(
    join(folder, ".env"),
    `OPENAI_BASE_URL=${server.baseURL}\nOPENAI_API_KEY=${KEY}\nOPENAI_MODEL=loopback-model\n`,
  );
  return folder;
}

describe("a .env inside the workspace", () => {
  it("the default setup (.env in INIT_CWD, no --workspace) warns once on stderr, with the path and no key", async () => {
    const server = await answeringServer();
    const folder = await folderWithSettings(server);
    const result = await run(["--prompt", "hi"], { INIT_CWD: folder }, await tempFolder());
    const dotEnv = join(folder, ".env");
    expect(result).toStrictEqual({
      code: 0,
      stdout: "done\n",
      stderr: `${settingsLine(server, dotEnv)}\n${warning(dotEnv)}`,
    });
    expect(result.stderr).not.toContain(KEY);
    expect(server.headers[0]?.authorization).toBe(`Bearer ${KEY}`);
  });

  it("--workspace pointing elsewhere: no warning", async () => {
    const server = await answeringServer();
    const folder = await folderWithSettings(server);
    const workspace = await tempFolder();
    const result = await run(["--prompt", "hi", "--workspace", workspace], { INIT_CWD: folder }, folder);
    expect(result).toStrictEqual({
      code: 0,
      stdout: "done\n",
      stderr: `${settingsLine(server, join(folder, ".env"))}\n`,
    });
  });

  it("settings from the environment and no .env: no warning", async () => {
    const server = await answeringServer();
    const env = {
      OPENAI_BASE_URL: server.baseURL,
      OPENAI_API_KEY: KEY,
      OPENAI_MODEL: "m",
      INIT_CWD: await tempFolder(),
    };
    expect(await run(["--prompt", "hi"], env, await tempFolder())).toStrictEqual({
      code: 0,
      stdout: "done\n",
      stderr: `模型: m @ ${new URL(server.baseURL).host} (模型来自 环境变量, 地址来自 环境变量, 密钥来自 环境变量)\n`,
    });
  });
});
