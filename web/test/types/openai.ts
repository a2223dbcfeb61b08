// Our response and chunk objects where the official `openai` package's types are expected
// (checked by `tsc --noEmit` in scripts/test-web): code written for the OpenAI SDK takes
// what `model.chat.completions.create` and `model.completions.create` return unchanged.
import type {
  ChatCompletion as OpenAIChatCompletion,
  ChatCompletionChunk as OpenAIChatCompletionChunk,
} from 'openai/resources/chat/completions';
import type { Completion as OpenAICompletion } from 'openai/resources/completions';
import type { CreateEmbeddingResponse as OpenAIEmbeddings } from 'openai/resources/embeddings';
import type Pocket from '../../src/pocket.js';
import type { ApiError, ChatCompletionCreateParams, RemoteModel } from '../../src/pocket.js';

export async function sdkShapes(model: Pocket | RemoteModel, signal: AbortSignal): Promise<void> {
  const request: ChatCompletionCreateParams = {
    model: 'pocket',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'Weather in Paris?' }] },
    ],
    max_tokens: 32,
    temperature: 0.7,
    top_p: 0.9,
    seed: 7,
    stop: ['\n\n'],
    frequency_penalty: 0.5,
    presence_penalty: 0.2,
    logit_bias: { '42': -100 },
    logprobs: true,
    top_logprobs: 3,
    tools: [{ type: 'function', function: { name: 'weather', parameters: { type: 'object' } } }],
    tool_choice: 'auto',
    chat_template_kwargs: { enable_thinking: false },
    top_k: 40,
    min_p: 0.05,
    repetition_penalty: 1.1,
    context_overflow: 'truncate',
  };
  const reply: OpenAIChatCompletion = await model.chat.completions.create({ ...request, stream: false }, { signal });
  const vectors: OpenAIEmbeddings = await model.embeddings.create({ input: ['a', 'b'], dimensions: 8 });
  const base64: string = (await model.embeddings.create({ input: 'a', encoding_format: 'base64' })).data[0].embedding;
  console.log(vectors.data[0].embedding.length, vectors.usage.total_tokens, base64.length);
  console.log(reply.choices[0].message.content, reply.usage?.prompt_tokens_details?.cached_tokens);
  const chunks = await model.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
  for await (const chunk of chunks) {
    const theirs: OpenAIChatCompletionChunk = chunk;
    console.log(theirs.choices[0]?.delta.content, chunk.choices[0]?.delta.reasoning_content);
  }
  // Structured output: OpenAI's response_format and pocketrt's grammar extension.
  const json: OpenAIChatCompletion = await model.chat.completions.create({
    messages: [{ role: 'user', content: 'A city as JSON.' }],
    response_format: {
      type: 'json_schema',
      json_schema: { name: 'city', strict: true, schema: { type: 'object', properties: { name: { type: 'string' } } } },
    },
  });
  console.log(json.choices[0].message.content);
  await model.completions.create({ prompt: 'Date: ', grammar: { type: 'regex', value: '[0-9]{4}-[0-9]{2}-[0-9]{2}' } });
  await model.completions.create({ prompt: 'x', response_format: { type: 'json_object' } });
  const text: OpenAICompletion = await model.completions.create({ prompt: 'Once upon', max_tokens: 8 });
  for await (const piece of await model.completions.create({ prompt: [1, 2, 3], stream: true })) {
    const theirs: OpenAICompletion = piece;
    console.log(theirs.choices[0]?.text);
  }
  try {
    await model.chat.completions.create({ messages: [], temperature: -1 });
  } catch (e) {
    const err = e as ApiError;
    console.log(text.choices[0].text, err.status, err.error.param, err.code);
  }
}
