import { cp, mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ModelClient } from "../core/model.js";
import { showingModelText } from "./progress.js";
import { SUMMARY_SYSTEM_PROMPT } from "../features/compaction.js";
import {
  CONSOLIDATOR_SYSTEM_PROMPT,
  EXTRACTOR_SYSTEM_PROMPT,
  MemoryRecord,
  MemoryStore,
  MemoryType,
  SELECTOR_SYSTEM_PROMPT,
} from "../features/memory.js";
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
  if (chapter === 9) await new MemoryStore({ workspace }).extend(DEMO_MEMORIES);
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

/**
 * Chapter 9's store: nine memories, written through the store itself so each passes its checks. The first five are the
 * book's type table and its consolidation example (tabs-old and tabs-new say the same thing); nine and the one the
 * demo extracts reach the threshold of 10, so the demo consolidates too.
 */
const DEMO_MEMORIES: readonly MemoryRecord[] = [
  seed("tabs-old", MemoryType.USER, "缩进用 tab，不用空格", "用户说过：缩进一律用 tab，不用空格。"),
  seed(
    "tabs-new",
    MemoryType.USER,
    "Indent with tabs, not spaces",
    "The user asked for tabs, not spaces, when indenting.",
  ),
  seed(
    "no-mock-database",
    MemoryType.FEEDBACK,
    "集成测试别 mock 数据库",
    "集成测试必须连真实数据库：mock 过的测试曾经掩盖过一次迁移故障。",
  ),
  seed(
    "auth-rewrite-compliance",
    MemoryType.PROJECT,
    "auth 重写是合规驱动",
    "auth 中间件重写是合规要求推动的，范围以合规为准。",
  ),
  seed(
    "pipeline-bugs-linear",
    MemoryType.REFERENCE,
    "pipeline bug 在 Linear INGEST",
    "pipeline 的 bug 记在 Linear 的 INGEST 项目里。",
  ),
  seed(
    "powershell-only-examples",
    MemoryType.PROJECT,
    "本项目的命令示例只使用 PowerShell",
    "给读者的命令示例一律写成 PowerShell 7 能运行的形式，不写 bash。",
  ),
  seed(
    "node-version",
    MemoryType.PROJECT,
    "本仓库要求 Node 20.19 或更新",
    "package.json 的 engines 要求 Node 20.19 或更新。",
  ),
  seed(
    "test-gate-command",
    MemoryType.REFERENCE,
    "每章的测试关卡是 npm run test:chNN",
    "例如第 9 章：npm run test:ch09。",
  ),
  seed("answer-in-chinese", MemoryType.USER, "用户希望用中文回答", "回答用中文；代码、命令和文件名保持原样。"),
];

/** One of the demo's memories, checked as every record is when it is made. */
function seed(name: string, kind: MemoryType, description: string, body: string): MemoryRecord {
  return new MemoryRecord({ name, kind, description, body });
}

/** Said before chapter 8's summary request, which no progress row shows: it is not a turn of the run. */
export const SUMMARY_NARRATION =
  "（请求历史经过 snip 和 micro 后仍超过 50,000 字节：先把完整的 canonical history 存成 transcript，再用同一个模型发一次不带工具的摘要请求。）";

/** Said before chapter 9's selector request: not a turn of the run, and what it picks is injected unseen. */
export const SELECTOR_NARRATION =
  "（选择记忆：用同一个模型发一次不带工具的请求，只给它目录（名称、文件名、一行描述）和这次的问题，它回一个 JSON 名称数组。选中的正文在这次运行的每个请求里，以一条 <relevant_memories> system 消息跟在历史后面，不进历史。）";

/** Said before chapter 9's extractor request, which runs after the answer is printed. */
export const EXTRACTOR_NARRATION =
  "（提取记忆：回答之后，把完整的 canonical history 和已有目录交给同一个模型，不带工具，要一个 JSON 数组；每一项都合格才写。）";

/** Said before chapter 9's consolidator request: the demo's 9 memories and the extracted one reach the threshold. */
export const CONSOLIDATOR_NARRATION =
  "（整理记忆：已有 9 条，加上新提取的 1 条，达到 10 条的阈值。它必须说出替换哪几条（source_names）、换成什么（records）；没列出的原样保留。新文件写好、MEMORY.md 和 manifest.json 原子替换之后，才删除旧文件。）";

/**
 * The requests no progress row shows, since they are no turns of the run (chapter 8's summary, chapter 9's three memory
 * side queries): each is said before it is sent, known by the system prompt it starts with.
 */
const SIDE_QUERY_NARRATION: ReadonlyMap<string, string> = new Map([
  [SUMMARY_SYSTEM_PROMPT, SUMMARY_NARRATION],
  [SELECTOR_SYSTEM_PROMPT, SELECTOR_NARRATION],
  [EXTRACTOR_SYSTEM_PROMPT, EXTRACTOR_NARRATION],
  [CONSOLIDATOR_SYSTEM_PROMPT, CONSOLIDATOR_NARRATION],
]);

/** Said when a request ends with chapter 5's reminder, which nothing else on screen shows. */
export const REMINDER_NARRATION = `（这次请求末尾多了一条临时 system 提醒：${TODO_STALE_REMINDER} 它只在这一次请求里，不进历史，也不进 transcript。）`;

/** Said before a subagent's first request, which holds nothing of the parent's history. */
export const SUBAGENT_NARRATION = "（子 Agent 的第一次请求只有 2 条消息：system 和 user；父 Agent 的历史一条都没有。）";

/**
 * The walkthrough's model, narrating: the text of each scripted turn that asks for tools is passed to `say`
 * as the turn is replayed, before its calls run. The closing turn's text is the answer, not narration.
 * A request that ends with chapter 5's stale-plan reminder is said first, in `REMINDER_NARRATION`, and a
 * subagent's first request (its own system prompt and the task, nothing else) in `SUBAGENT_NARRATION`; chapter 8's
 * summary request and chapter 9's three memory side queries, by the system prompt each starts with.
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
      const sideQuery = first?.role === "system" ? SIDE_QUERY_NARRATION.get(first.content) : undefined;
      if (sideQuery !== undefined) say(sideQuery);
      return replies.complete(request);
    },
  };
}
