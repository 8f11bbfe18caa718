import { cp, mkdir, mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ModelClient } from "../core/model.js";
import { showingModelText } from "./progress.js";
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
  // From src/cli (tsx) and dist/cli (built) alike, the walkthroughs are two folders up, one per chapter.
  const name = `ch${String(chapter).padStart(2, "0")}.json`;
  const transcript = await readTranscript(new URL(`../../demo/${name}`, import.meta.url));
  const first = transcript.messages.find((message) => message.role === "user");
  return { root, workspace, prompt: first?.content ?? "", transcript };
}

/**
 * The walkthrough's model, narrating: the text of each scripted turn that asks for tools is passed to `say`
 * as the turn is replayed, before its calls run. The closing turn's text is the answer, not narration.
 */
export function narrated(model: ModelClient, say: (text: string) => void): ModelClient {
  return showingModelText(model, (text) => say(text));
}
