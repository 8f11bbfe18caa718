import { cp, mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ModelClient } from "../core/model.js";
import { showingModelText } from "./progress.js";
import { DEFAULT_SUBAGENT_SYSTEM_PROMPT } from "../features/subagents.js";
import { TODO_STALE_REMINDER } from "../features/todos.js";
import type { Transcript } from "./transcript.js";
import { readTranscript } from "./transcript.js";

export interface DemoSetup {
  /** The new temporary folder around the workspace: what the reader may delete afterwards. */
  readonly root: string;
  readonly workspace: string;
  readonly prompt: string;
  readonly transcript: Transcript;
}

const README = `# 演示工作区

这是 agent-tutorial 的演示用临时文件夹。智能体只能在这里工作。
`;

/**
 * A fresh workspace in a new temporary folder, and chapter `chapter`'s bundled walkthrough to replay.
 * The workspace sits one level down, so a walkthrough's `../…` paths also stay inside the temp folder.
 */
export async function prepareDemo(chapter: number): Promise<DemoSetup> {
  const root = await mkdtemp(join(tmpdir(), "agent-tutorial-demo-"));
  const workspace = join(root, "workspace");
  await mkdir(workspace);
  await writeFile(join(workspace, "README.md"), README, "utf8");
  if (chapter === 3) {
    // The book runs chapter 3 from `code/`, where its call A globs `chapters/ch03/src/**/*.ts`: give the
    // demo workspace the same folder, with this snapshot's own sources, so that glob finds what it finds there.
    const sources = fileURLToPath(new URL("../../src/", import.meta.url));
    await cp(sources, join(workspace, "chapters", "ch03", "src"), { recursive: true });
  }
  if (chapter === 7) {
    // The shipped example Skill, as the book's workspace has it: the catalog in the first request names it.
    await cp(fileURLToPath(new URL("../../demo/skills/", import.meta.url)), join(workspace, "skills"), {
      recursive: true,
    });
  }
  // From src/cli (tsx) and dist/cli (built) alike, the walkthroughs are two folders up, one per chapter.
  const name = `ch${String(chapter).padStart(2, "0")}.json`;
  const transcript = await readTranscript(new URL(`../../demo/${name}`, import.meta.url));
  const first = transcript.messages.find((message) => message.role === "user");
  return { root, workspace, prompt: first?.content ?? "", transcript };
}

/** Said when a request ends with chapter 5's reminder, which nothing else on screen shows. */
export const REMINDER_NARRATION = `（这次请求末尾多了一条临时 system 提醒：${TODO_STALE_REMINDER} 它只在这一次请求里，不进历史，也不进 transcript。）`;

/** Said before a subagent's first request, which holds nothing of the parent's history. */
export const SUBAGENT_NARRATION = "（子 Agent 的第一次请求只有 2 条消息：system 和 user；父 Agent 的历史一条都没有。）";

/**
 * The walkthrough's model, narrating: the text of each scripted turn that asks for tools is passed to `say`
 * as the turn is replayed, before its calls run. The closing turn's text is the answer, not narration.
 * A request that ends with chapter 5's stale-plan reminder is said first, in `REMINDER_NARRATION`, and a
 * subagent's first request (its own system prompt and the task, nothing else) in `SUBAGENT_NARRATION`.
 */
export function narrated(model: ModelClient, say: (text: string) => void): ModelClient {
  // The scripted turns' own words, as a real run shows a model's.
  const replies = showingModelText(model, (text) => say(text));
  return {
    complete(request) {
      const last = request.messages.at(-1);
      if (last?.role === "system" && last.content === TODO_STALE_REMINDER) say(REMINDER_NARRATION);
      const [first] = request.messages;
      if (request.messages.length === 2 && first?.content === DEFAULT_SUBAGENT_SYSTEM_PROMPT) say(SUBAGENT_NARRATION);
      return replies.complete(request);
    },
  };
}
