import type { PassThrough, Writable } from "node:stream";

/** Where the approver prints: it keeps its text and announces each write as a `text` event, like `Sink`. */
export type Screen = Writable & { readonly text: string };

/** The approval question, as the terminal approver prints it. */
export const QUESTION = "允许本次调用? [y/N] ";

/**
 * A moment later, as a person answers: a few turns of the event loop. The approver ignores whatever arrives
 * before it has read its input once (`AnswerInput`), and a question can come as soon as it is created.
 */
export async function aMomentLater(): Promise<void> {
  for (let turn = 0; turn < 3; turn += 1) await new Promise((resolve) => setImmediate(resolve));
}

/** How the approver asks to go on when a call's arguments take more than one page; an answer is typed there too. */
export const PAGE_PROMPT_END = "回车继续, 输入其他内容拒绝) ";

/** Resolves once `output` shows the `count`-th question or page prompt (1-based). */
export function asked(output: Screen, count = 1): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      const prompts = output.text.split(QUESTION).length + output.text.split(PAGE_PROMPT_END).length - 2;
      if (prompts < count) return;
      output.off("text", check);
      resolve();
    };
    output.on("text", check);
    check();
  });
}

/**
 * Types `answers` into `input` the way a person does: each one only after its question has appeared on
 * `output`, a moment later; after the last one the input ends, so any later question meets end of input.
 * An answer is the raw text typed, line break included (`"y\n"`), or without one for half a line.
 */
export function typeAnswers(input: PassThrough, output: Screen, answers: readonly string[]): void {
  void (async () => {
    for (const [index, answer] of answers.entries()) {
      await asked(output, index + 1);
      await aMomentLater();
      input.write(answer);
    }
    input.end();
  })();
}
