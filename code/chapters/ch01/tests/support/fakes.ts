import type { CommandResult, CommandRunner } from "../../src/core/commands.js";
import type { AuthorizationRequest, ToolAuthorizer } from "../../src/core/loop.js";

/** A command that printed `output` and exited 0: the fields a `CommandResult` leaves unsaid, filled in. */
export function commandResult(fields: Partial<CommandResult> = {}): CommandResult {
  return { output: "a.txt", exitCode: 0, timedOut: false, truncated: false, ...fields };
}

/** One `run(command, cwd)` as the fake saw it. */
export interface RecordedCommand {
  readonly command: string;
  readonly cwd: string;
}

/** What a `FakeCommandRunner` answers: one fixed result, or a function of the call (which may throw). */
export type FakeAnswer = CommandResult | ((command: string, cwd: string, index: number) => CommandResult);

/** A `CommandRunner` that runs nothing: it records each `(command, cwd)` and answers a fixed or per-call result. */
export class FakeCommandRunner implements CommandRunner {
  readonly calls: RecordedCommand[] = [];

  constructor(private readonly answer: FakeAnswer = commandResult()) {}

  run(command: string, cwd: string): Promise<CommandResult> {
    const index = this.calls.length;
    this.calls.push({ command, cwd });
    try {
      return Promise.resolve(typeof this.answer === "function" ? this.answer(command, cwd, index) : this.answer);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }
}

/** A `FakeCommandRunner` whose every call rejects, as `PowerShellRunner` does when no process starts. */
export function unstartableRunner(): FakeCommandRunner {
  return new FakeCommandRunner(() => {
    throw new Error("spawn pwsh ENOENT");
  });
}

/**
 * A `ToolAuthorizer` that counts its calls in `requests` and answers `answer` (a value, or a function
 * of the request) exactly as it is: a non-boolean answer such as `"yes"` or `1` reaches the loop unchanged.
 */
export class CountingAuthorizer implements ToolAuthorizer {
  readonly requests: AuthorizationRequest[] = [];

  constructor(private readonly answer: unknown = true) {}

  async authorize(request: AuthorizationRequest): Promise<boolean> {
    this.requests.push(request);
    const answer: unknown =
      typeof this.answer === "function"
        ? await (this.answer as (request: AuthorizationRequest) => unknown)(request)
        : this.answer;
    return answer as boolean;
  }
}
