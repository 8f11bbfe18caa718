import { cp, mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ModelClient } from "../core/model.js";
import { showingModelText } from "./progress.js";
import { SUMMARY_SYSTEM_PROMPT } from "../features/compaction.js";
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
  if (chapter === 8) await writeCompactionFiles(workspace);
  // From src/cli (tsx) and dist/cli (built) alike, the walkthroughs are two folders up, one per chapter.
  const name = `ch${String(chapter).padStart(2, "0")}.json`;
  const transcript = await readTranscript(new URL(`../../demo/${name}`, import.meta.url));
  const first = transcript.messages.find((message) => message.role === "user");
  return { root, workspace, prompt: first?.content ?? "", transcript };
}

/**
 * Chapter 8's workspace: `big.log`, 60,000 UTF-8 bytes (600 numbered lines of CJK text), past the 30,000-byte
 * threshold alone; and seven 29,000-byte `part-N.md`, each under it, 203,000 bytes together, past one reply's
 * 200,000-byte budget.
 */
async function writeCompactionFiles(workspace: string): Promise<void> {
  // 100 bytes a line: "第NNN行" (9 bytes), 30 CJK characters (90) and the newline.
  const logLine = (n: number): string =>
    `第${String(n).padStart(3, "0")}行：构建已完成，测试全部通过，没有新的警告，也没有失败的用例。\n`;
  await writeFile(join(workspace, "big.log"), Array.from({ length: 600 }, (_, n) => logLine(n + 1)).join(""), "utf8");
  for (let part = 1; part <= 7; part += 1) {
    const title = `# Part ${part}\n\n`;
    const line = `Part ${part} notes: the agent keeps large results on disk and only a preview in the history.\n`;
    const body = line.repeat(Math.ceil(DEMO_PART_BYTES / line.length)).slice(0, DEMO_PART_BYTES - title.length - 1);
    await writeFile(join(workspace, `part-${part}.md`), `${title}${body}\n`, "utf8");
  }
}

const DEMO_PART_BYTES = 29_000;

/** Said before chapter 8's summary request, which no progress row shows: it is not a turn of the run. */
export const SUMMARY_NARRATION =
  "（请求历史经过 snip 和 micro 后仍超过 50,000 字节：先把完整的 canonical history 存成 transcript，再用同一个模型发一次不带工具的摘要请求。）";

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
      if (first?.content === SUMMARY_SYSTEM_PROMPT) say(SUMMARY_NARRATION);
      return replies.complete(request);
    },
  };
}
