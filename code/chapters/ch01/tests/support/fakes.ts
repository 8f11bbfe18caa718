import { expect } from "vitest";
import type { ApprovalProvider, ApprovalRequest } from "../../src/core/approval.js";
import type { CommandRequest, CommandResult, CommandRunner } from "../../src/core/command-runner.js";

/** A `CommandRunner` that runs nothing: it records each request and answers with one fixed result. */
export class RecordingCommandRunner implements CommandRunner {
  readonly commands: CommandRequest[] = [];
  constructor(
    private readonly result: CommandResult = { output: "a.txt", exitCode: 0, timedOut: false, truncated: false },
  ) {}
  run(request: CommandRequest): Promise<CommandResult> {
    this.commands.push(request);
    return Promise.resolve(this.result);
  }
}

/** The request the `shell` tool sends its runner for `command` in `workspace`, long output saved under `.agent/`. */
export function shellRequest(command: string, workspace: string): CommandRequest {
  const escaped = workspace.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return {
    command,
    cwd: workspace,
    fullOutputPath: expect.stringMatching(
      new RegExp(`^${escaped}/\\.agent/shell-output/shell-\\d+-[a-z0-9]+\\.log$`),
    ) as string,
  };
}

/** What an approval provider was shown, in a shape every chapter's tests can compare. */
export interface SeenApproval {
  readonly toolName: string;
  readonly reason: string;
  readonly arguments: unknown;
}

/** Counts its calls and answers with `answer` (a value, or a function of the request) as it is. */
export class CountingApproval implements ApprovalProvider {
  readonly requests: SeenApproval[] = [];
  constructor(private readonly answer: unknown = true) {}
  async approve(request: ApprovalRequest): Promise<boolean> {
    const seen = { toolName: request.toolName, reason: request.reason, arguments: request.arguments };
    this.requests.push(seen);
    const answer: unknown =
      typeof this.answer === "function" ? await (this.answer as (r: SeenApproval) => unknown)(seen) : this.answer;
    return answer as boolean;
  }
}
