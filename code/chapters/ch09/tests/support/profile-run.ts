import { rm } from "node:fs/promises";
import { dirname } from "node:path";
import { PassThrough } from "node:stream";
import { afterEach } from "vitest";
import { runProfile, type CliIO } from "../../src/cli.js";
import type { ChapterProfile } from "../../src/core/profiles.js";
import { afterSettingsLine, type CliRun } from "./cli-run.js";
import { completion, startLoopbackOpenAI, type LoopbackOpenAI, type LoopbackReply } from "./loopback-openai.js";
import { Sink } from "./sink.js";
import { typeAnswers } from "./typist.js";

// What a chapter gate needs to run its fixed entry as a program would (chapter 5 on: `runProfile`) against a
// scripted loopback provider: the gate files of chapters 5, 6 and 7 share it instead of each carrying a copy.

const servers: LoopbackOpenAI[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

/** A loopback provider that answers `replies` in order (a final text past them), recording every request. */
export async function scriptedProvider(replies: readonly LoopbackReply[]): Promise<LoopbackOpenAI> {
  const server = await startLoopbackOpenAI(
    (_body, index) => replies[index] ?? { json: completion({ content: "past the script" }) },
  );
  servers.push(server);
  return server;
}

/** A reply asking for one call, `args` sent as their JSON text. */
export const wireCall = (id: string, name: string, args: unknown): LoopbackReply => ({
  json: completion({ toolCalls: [{ id, name, arguments: JSON.stringify(args) }] }),
});

/** A reply with text and no calls. */
export const wireText = (content: string): LoopbackReply => ({ json: completion({ content }) });

/** The three settings, pointing at `server`, with a key no real provider knows. */
export const loopbackEnv = (server: LoopbackOpenAI): CliIO["env"] => ({
  OPENAI_API_KEY: "test-key",
  OPENAI_BASE_URL: server.baseURL,
  OPENAI_MODEL: "loopback-model",
});

/** This process's environment without any setting: a run that reads one has none to find. */
export function keylessEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith("OPENAI_") && key !== "INIT_CWD"),
  );
}

/**
 * `npm run chNN -- …` in this process (the entry's `runProfile(profile, argv)`), in `cwd`. With `answers`, stdin is
 * a terminal on which each answer is typed once its question has appeared; without, there is no terminal.
 */
export async function runProfileInProcess(
  profile: ChapterProfile,
  argv: readonly string[],
  env: CliIO["env"],
  cwd: string,
  answers?: readonly string[],
): Promise<CliRun> {
  const stdin = new PassThrough();
  const stdout = new Sink();
  const stderr = new Sink();
  if (answers === undefined) stdin.end();
  else typeAnswers(stdin, stderr, answers);
  const io: CliIO = { env, cwd, stdin, stdinIsTTY: answers !== undefined, stdout, stderr, stderrIsTTY: false };
  const code = await runProfile(profile, argv, io);
  return { code, stdout: stdout.text, stderr: afterSettingsLine(stderr.text, argv, env) };
}

const demoRoots: string[] = [];
afterEach(async () => {
  await Promise.all(demoRoots.splice(0).map((folder) => rm(folder, { recursive: true, force: true })));
});

/** The temp workspace a demo run names on stderr; its parent folder is removed after the test. */
export function announcedWorkspace(output: string): string {
  const named = /演示工作区[:：] ?(\S+?)(?:（|\s|$)/.exec(output)?.[1];
  if (named === undefined) throw new Error(`the demo did not say where its workspace is:\n${output}`);
  demoRoots.push(dirname(named));
  return named;
}
