import type { AnswerInput } from "./answer-input.js";
import { argumentsView, BOUNDS } from "./approval-view.js";
import type { Terminal } from "./terminal.js";
import { oneLine } from "./visible.js";

/** How a question about one call ended. */
export type ApprovalAnswer = "approved" | "denied" | "unshowable";

/** Said instead of a question when the arguments cannot be shown whole. */
export const UNSHOWABLE_LINE = `参数太长或嵌套太深, 无法完整显示 (最多 ${BOUNDS.approvalRows} 行), 默认拒绝。`;
/** What the model is told when it is refused for that reason, so it can send the work in smaller parts. */
export const UNSHOWABLE_REASON = `The arguments are too long or too deeply nested to show in full for approval (at most ${BOUNDS.approvalRows} rows of ${BOUNDS.row} columns); send smaller parts`;

export function isYes(answer: string): boolean {
  return /^(y|yes)$/i.test(answer.trim());
}

/**
 * The approval block: the book's four lines for an ordinary call; for any other, every row of its arguments, a
 * page of `pageRows` at a time (Enter shows the next, anything else refuses), then the question. Arguments no
 * one could read whole are not asked about at all: `y` never approves text that was not on the screen.
 */
export async function askApproval(
  terminal: Terminal,
  answers: AnswerInput,
  call: { readonly toolName: string; readonly reason: string; readonly arguments: Readonly<Record<string, unknown>> },
): Promise<ApprovalAnswer> {
  const view = argumentsView(call.arguments);
  terminal.line(`工具调用需要批准: ${oneLine(call.toolName)}`);
  terminal.line(`原因: ${oneLine(call.reason)}`);
  if (!view.complete) {
    terminal.line(UNSHOWABLE_LINE);
    return "unshowable";
  }
  const lines = [`参数: ${view.json}`, ...view.below];
  for (let start = 0; start < lines.length; start += BOUNDS.pageRows) {
    for (const line of lines.slice(start, start + BOUNDS.pageRows)) terminal.line(line);
    const left = lines.length - start - BOUNDS.pageRows;
    if (left <= 0) break;
    terminal.prompt(`(还有 ${left} 行未显示; 回车继续, 输入其他内容拒绝) `);
    const answer = await answers.next();
    if (answer === undefined || answer.trim() !== "") return "denied";
  }
  terminal.prompt("允许本次调用? [y/N] ");
  const answer = await answers.next();
  return answer !== undefined && isYes(answer) ? "approved" : "denied";
}
