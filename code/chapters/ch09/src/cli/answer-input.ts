import type { Readable } from "node:stream";
import { StringDecoder } from "node:string_decoder";

/** The most of one answer that is kept; a longer line is still read to its end. */
const MAX_ANSWER = 1024;

/**
 * The answers a person types on the terminal, one question at a time. Only what is typed after a question
 * appeared can answer it: whatever was typed ahead, complete lines and half a line alike, and whatever was
 * left over after the last answer, is dropped, so a `y` typed early never approves a call nobody has seen.
 * It reads from the start, so nothing typed ahead waits in the input for the next question.
 */
export class AnswerInput {
  readonly #input: Readable;
  readonly #decoder = new StringDecoder("utf8");
  #answer: ((line: string | undefined) => void) | undefined;
  #listening = false;
  /** Whether the input has been read since we started: what was typed before that is still to come. */
  #primed = false;
  #line = "";
  #ended = false;

  constructor(input: Readable) {
    this.#input = input;
    input.on("data", this.#onData);
    input.on("end", this.#onEnd);
    input.on("error", this.#onEnd);
    // Lines typed while the program started wait in the terminal until the first read, which may come after
    // a question printed at once (a replay asks before any I/O): they count only from the turn after it.
    setImmediate(() =>
      setImmediate(() => {
        this.#primed = true;
        if (this.#answer !== undefined) this.#listening = true;
      }),
    );
  }

  /**
   * The next line typed from now on, without its line break; `undefined` at the end of input (where a half
   * line typed from now on counts). Call it right when the question has been printed.
   */
  next(): Promise<string | undefined> {
    this.#settle(undefined);
    if (this.#ended) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      this.#answer = resolve;
      this.#line = "";
      this.#listening = this.#primed;
    });
  }

  /** Stops reading, so the process can exit; a question still waiting gets `undefined`. */
  close(): void {
    this.#input.off("data", this.#onData);
    this.#input.off("end", this.#onEnd);
    this.#input.off("error", this.#onEnd);
    this.#input.pause();
    this.#ended = true;
    this.#settle(undefined);
  }

  readonly #onData = (chunk: Buffer | string): void => {
    const text = typeof chunk === "string" ? chunk : this.#decoder.write(chunk);
    if (this.#answer === undefined || !this.#listening) return;
    const end = text.indexOf("\n");
    this.#line = (this.#line + (end === -1 ? text : text.slice(0, end))).slice(0, MAX_ANSWER);
    // The rest of the chunk was typed after this answer: it is type-ahead for the next question.
    if (end !== -1) this.#settle(this.#line.replace(/\r$/, ""));
  };

  readonly #onEnd = (): void => {
    this.#ended = true;
    this.#settle(this.#listening && this.#line !== "" ? this.#line : undefined);
  };

  #settle(line: string | undefined): void {
    const answer = this.#answer;
    this.#answer = undefined;
    this.#listening = false;
    this.#line = "";
    answer?.(line);
  }
}
