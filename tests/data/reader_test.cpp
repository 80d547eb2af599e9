// hh-rlhf reader and dataset builder: bad files and lines, pipes and how much is read (messages name file and line), both policies,
// globs, chat rendering (expected text written by hand from tokenizer_config.json's chat_template),
// end token and the too-long policies.
#include <sys/stat.h>

#include <csignal>
#include <thread>

#include "core/check.h"
#include "data/chat_format.h"
#include "data/hh_rlhf.h"
#include "data/line_reader.h"
#include "data/pair_dataset.h"
#include "data/tokenizer.h"
#include "test_util.h"

namespace zero::data {
namespace {

using test::TempDir;

using test::qwen;

using test::error_of;

std::vector<std::pair<std::string, std::string>> read_all(const std::vector<std::string>& files,
                                                          const HhReaderConfig& cfg, ReadStats& stats) {
  std::vector<std::pair<std::string, std::string>> out;
  read_hh_pairs(files, cfg, stats, [&](PairText& p) { out.emplace_back(p.chosen, p.rejected); });
  return out;
}

TEST(Reader, BundledSampleReadsCleanly) {
  ReadStats stats;
  const auto pairs = read_all({test::hh_train(), test::hh_test()}, {}, stats);
  EXPECT_EQ(stats.files, 2);
  EXPECT_EQ(stats.pairs, 2312);  // upstream harmless-base/test.jsonl.gz has 2,312 lines
  EXPECT_EQ(stats.bad_total(), 0);
  EXPECT_EQ(pairs.front().first.rfind("\n\nHuman: ", 0), 0u);
}

TEST(Reader, MissingFileNotGzipAndTruncatedGzip) {
  TempDir dir;
  ReadStats stats;
  const std::string missing = dir.file("missing.jsonl.gz");
  std::string msg = error_of([&] { read_all({missing}, {}, stats); });
  EXPECT_NE(msg.find(missing + ": cannot open"), std::string::npos) << msg;
  msg = error_of([&] { expand_inputs({missing}); });
  EXPECT_NE(msg.find(missing + ": no such file"), std::string::npos) << msg;

  const std::string plain = dir.file("plain.jsonl.gz");
  test::write_text(plain, "{\"chosen\": \"a\", \"rejected\": \"b\"}\n");
  msg = error_of([&] { read_all({plain}, {}, stats); });
  EXPECT_NE(msg.find(plain + ": not a gzip file"), std::string::npos) << msg;

  // A gzip stream cut in half: reported with the file and the line it stopped in.
  const std::string full = dir.file("full.jsonl.gz"), cut = dir.file("cut.jsonl.gz");
  std::string body;
  for (int i = 0; i < 2000; ++i) body += "{\"chosen\": \"line " + std::to_string(i * 7919) + "\", \"rejected\": \"x\"}\n";
  test::write_gz(full, body);
  std::ifstream f(full, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  test::write_text(cut, bytes.substr(0, bytes.size() / 2));
  msg = error_of([&] { read_all({cut}, {}, stats); });
  EXPECT_NE(msg.find(cut + ":"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated gzip data"), std::string::npos) << msg;
}

// How much of a file is read (progress reports): after line i of lines of 1001 bytes, exactly i x 1001 of
// the file's bytes, though the reader holds 256 KiB ahead; a pipe has no size (-1) and keeps its first
// bytes, the two read to look for gzip's magic; gzip from a pipe is refused (zlib reopens by name).
TEST(Reader, FractionReadAndPipes) {
  TempDir dir;
  const std::string path = dir.file("lines.jsonl");
  const std::string line(1000, 'x');
  std::string body;
  for (int i = 0; i < 1000; ++i) body += line + "\n";
  test::write_text(path, body);
  LineReader r(path);
  std::string got;
  EXPECT_EQ(r.fraction_read(), 0.0);
  for (int i = 1; i <= 1000; ++i) {
    ASSERT_TRUE(r.next(got));
    ASSERT_EQ(r.fraction_read(), double(i) * 1001.0 / 1001000.0) << i;
  }
  EXPECT_FALSE(r.next(got));

  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] { test::write_text(fifo, "{\"a\": 1}\nsecond\n"); });
  {
    LineReader p(fifo);
    ASSERT_TRUE(p.next(got));
    EXPECT_EQ(got, "{\"a\": 1}");
    EXPECT_EQ(p.fraction_read(), -1.0);
    ASSERT_TRUE(p.next(got));
    EXPECT_EQ(got, "second");
  }
  writer.join();
  std::signal(SIGPIPE, SIG_IGN);  // the reader may close before the writer's last write: EPIPE, not a kill
  std::thread gz_writer([&] { test::write_gz(fifo, "{\"a\": 1}\n"); });
  const std::string msg = error_of([&] { LineReader p(fifo); });
  gz_writer.join();
  EXPECT_NE(msg.find(fifo + ": gzip data from a pipe"), std::string::npos) << msg;
}

TEST(Reader, MalformedLinesAreCountedWithTheirFirstLine) {
  TempDir dir;
  const std::string path = dir.file("bad.jsonl");
  test::write_text(path,
                   "{\"chosen\": \"\\n\\nHuman: hi\\n\\nAssistant: yes\", \"rejected\": \"\\n\\nHuman: hi\\n\\nAssistant: no\"}\n"
                   "{\"chosen\": \"broken\n"                          // 2: not JSON
                   "{\"chosen\": \"a\"}\n"                            // 3: no rejected
                   "{\"chosen\": 17, \"rejected\": \"b\"}\n"          // 4: not a string
                   "\n"                                               // blank: not a record
                   "{\"chosen\": \"a\", \"rejected\": \"  \"}\n"      // 6: empty
                   "[1, 2]\n"                                         // 7: not an object
                   "{\"chosen\": \"c\", \"rejected\": \"d\"}\r\n");   // 8: good, CRLF
  ReadStats stats;
  const auto pairs = read_all({path}, {}, stats);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[1], (std::pair<std::string, std::string>{"c", "d"}));
  EXPECT_EQ(stats.lines, 7);
  EXPECT_EQ(stats.bad[size_t(BadLineKind::NotJson)], 2);
  EXPECT_EQ(stats.bad[size_t(BadLineKind::MissingField)], 1);
  EXPECT_EQ(stats.bad[size_t(BadLineKind::NotString)], 1);
  EXPECT_EQ(stats.bad[size_t(BadLineKind::Empty)], 1);
  // The reason is nlohmann's (the line ends inside a string), without its exception tag.
  EXPECT_EQ(stats.first_bad[size_t(BadLineKind::NotJson)],
            path + ":2: not a JSON object: parse error at line 1, column 19: syntax error while parsing value - "
                   "invalid string: missing closing quote; last read: '\"broken'");
  EXPECT_EQ(stats.first_bad[size_t(BadLineKind::MissingField)], path + ":3: no field 'rejected'");
  EXPECT_EQ(stats.first_bad[size_t(BadLineKind::NotString)], path + ":4: field 'chosen' is neither a string nor a list of messages");
  EXPECT_EQ(stats.first_bad[size_t(BadLineKind::Empty)], path + ":6: field 'rejected' is empty");
  EXPECT_NE(stats.report().find("not_json: 2 (first: " + path + ":2: not a JSON object: parse error"), std::string::npos)
      << stats.report();

  HhReaderConfig fail;
  fail.bad_lines = BadLinePolicy::Fail;
  ReadStats s2;
  const std::string msg = error_of([&] { read_all({path}, fail, s2); });
  EXPECT_EQ(msg.rfind(path + ":2: not a JSON object: parse error", 0), 0u) << msg;

  // Chat mode also rejects text that is not a transcript.
  HhReaderConfig chat;
  chat.mode = TextMode::Chat;
  ReadStats s3;
  EXPECT_EQ(read_all({path}, chat, s3).size(), 1u);
  EXPECT_EQ(s3.first_bad[size_t(BadLineKind::NotTranscript)].rfind(path + ":8: field 'chosen' is not a", 0), 0u)
      << s3.first_bad[size_t(BadLineKind::NotTranscript)];
}

// What a line that is no JSON object says: the kind of JSON it is, or why it does not parse, in printable
// ASCII (the reason goes into logs and score's JSON rows) and cut short.
TEST(Reader, NotAnObjectSaysWhy) {
  const auto why = [](const std::string& line) {
    PairText pair;
    const std::optional<BadLine> bad = parse_hh_line(line, HhReaderConfig{}, pair);
    EXPECT_TRUE(bad.has_value()) << line;
    EXPECT_EQ(bad ? bad->kind : BadLineKind::Empty, BadLineKind::NotJson) << line;
    return bad ? bad->why : std::string();
  };
  EXPECT_EQ(why("[1, 2]"), "not a JSON object: the line is a JSON array");
  EXPECT_EQ(why("\"text\""), "not a JSON object: the line is a JSON string");
  EXPECT_EQ(why(R"({"chosen": "a", "rejected": "b", "margin": 1e400})"),
            "not a JSON object: number overflow parsing '1e400'");
  EXPECT_EQ(why("\xff\xfe{}"), "not a JSON object: parse error at line 1, column 1: syntax error while parsing value - "
                                "invalid literal; last read: '\\xff'");
  // Text quoted from a line stays valid UTF-8 (score writes it into JSON): whole characters, cut at 40.
  HhReaderConfig with_margin;
  with_margin.margin_field = "margin";
  std::string e50, e39, u39;
  for (int i = 0; i < 50; ++i) e50 += "\xc3\xa9";  // é
  for (int i = 0; i < 39; ++i) e39 += "\xc3\xa9", u39 += "\xc3\xbc";  // é, ü
  PairText pair;
  auto bad = parse_hh_line(R"({"chosen": "a", "rejected": "b", "margin": ")" + e50 + "\"}", with_margin, pair);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->why, "field 'margin' is not a finite number (a float's range): \"" + e39 + "...")
      << bad->why;
  std::string u50;
  for (int i = 0; i < 50; ++i) u50 += "\xc3\xbc";
  bad = parse_hh_line(R"({"chosen": [{"role": "\u0001)" + u50 + R"(", "content": "x"}], "rejected": "b"})", {}, pair);
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->why, "field 'chosen', message 0: role '\\x01" + u39 + "...' is not system, user or assistant")
      << bad->why;
  const std::string long_line = "{\"chosen\": \"" + std::string(500, 'x');
  const std::string cut = why(long_line);
  EXPECT_EQ(cut.size(), std::string("not a JSON object: ").size() + 160 + 3) << cut;
  EXPECT_TRUE(cut.ends_with("xxx...")) << cut;
}

TEST(Reader, ConfigurableFieldNamesAndGlobs) {
  TempDir dir;
  std::filesystem::create_directories(dir.path / "b");
  std::filesystem::create_directories(dir.path / "a");
  test::write_gz(dir.file("b/train.jsonl.gz"), "{\"good\": \"2\", \"bad\": \"x\"}\n");
  test::write_gz(dir.file("a/train.jsonl.gz"), "{\"good\": \"1\", \"bad\": \"y\"}\n");
  test::write_gz(dir.file("a/test.jsonl.gz"), "{\"good\": \"3\", \"bad\": \"z\"}\n");
  const auto files = expand_inputs({dir.file("*/train.jsonl.gz")});
  ASSERT_EQ(files, (std::vector<std::string>{dir.file("a/train.jsonl.gz"), dir.file("b/train.jsonl.gz")}));
  HhReaderConfig cfg;
  cfg.chosen_field = "good";
  cfg.rejected_field = "bad";
  ReadStats stats;
  const auto pairs = read_all(files, cfg, stats);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].first, "1");
  EXPECT_EQ(pairs[1].second, "x");

  std::string msg = error_of([&] { expand_inputs({dir.file("*/valid.jsonl.gz")}); });
  EXPECT_NE(msg.find("matches no file"), std::string::npos) << msg;
  msg = error_of([&] { expand_inputs({dir.file("a")}); });
  EXPECT_NE(msg.find("is a folder"), std::string::npos) << msg;
}

TEST(ChatFormat, RendersTheQwen3TemplateWithAnEmptyThinkBlock) {
  const std::string hh = "\n\nHuman: What is 2+2?\n\nAssistant: 4.\n\nHuman: And 3+3? \n\nAssistant:  6.";
  const auto chat = hh_to_qwen_chat(hh);
  ASSERT_TRUE(chat.has_value());
  EXPECT_EQ(*chat,
            "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
            "<|im_start|>assistant\n4.<|im_end|>\n"
            "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n6.");
  EXPECT_FALSE(hh_to_qwen_chat("no markers here").has_value());
  EXPECT_FALSE(hh_to_qwen_chat("preamble\n\nHuman: hi").has_value());
  // Special tokens are single ids in the tokenized chat text.
  const auto ids = qwen().encode(*chat);
  EXPECT_EQ(ids.front(), 151644);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 151667), 1);  // <think>
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 151645), 3);  // three closed turns
}

// Preference data in the shapes it comes in: a prompt field, message lists, both, mixed. Expected texts
// written by hand from tokenizer_config.json's chat_template (tests/pmtrain/chat_template_crosscheck.py
// checks the renderer against the template itself, through jinja2).
std::vector<std::pair<std::string, std::string>> read_lines(const TempDir& dir, const std::vector<nlohmann::json>& lines,
                                                            const HhReaderConfig& cfg, ReadStats& stats) {
  std::string body;
  for (const auto& l : lines) body += l.dump() + "\n";
  const std::string path = dir.file("pairs.jsonl");
  test::write_text(path, body);
  return read_all({path}, cfg, stats);
}
nlohmann::json msg(const char* role, const char* content) { return {{"role", role}, {"content", content}}; }
constexpr const char* kThink = "<|im_start|>assistant\n<think>\n\n</think>\n\n";

TEST(PreferenceShapes, PromptFieldWithStringsRawAndChat) {
  TempDir dir;
  const nlohmann::json line = {{"prompt", "\n\nHuman: Hi there\n\nAssistant:"}, {"chosen", " Hello!"}, {"rejected", " Go away."}};
  HhReaderConfig cfg;
  cfg.prompt_field = "prompt";
  ReadStats stats;
  auto pairs = read_lines(dir, {line}, cfg, stats);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].first, "\n\nHuman: Hi there\n\nAssistant: Hello!");
  EXPECT_EQ(pairs[0].second, "\n\nHuman: Hi there\n\nAssistant: Go away.");
  cfg.mode = TextMode::Chat;
  pairs = read_lines(dir, {line}, cfg, stats);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].first, std::string("<|im_start|>user\nHi there<|im_end|>\n") + kThink + "Hello!");
  EXPECT_EQ(pairs[0].second, std::string("<|im_start|>user\nHi there<|im_end|>\n") + kThink + "Go away.");

  // A plain prompt in chat mode: the user's message, each answer the assistant's (kept as written).
  pairs = read_lines(dir, {{{"prompt", "Capital of France?"}, {"chosen", "Paris."}, {"rejected", " Lyon"}}}, cfg, stats);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].first, std::string("<|im_start|>user\nCapital of France?<|im_end|>\n") + kThink + "Paris.");
  EXPECT_EQ(pairs[0].second, std::string("<|im_start|>user\nCapital of France?<|im_end|>\n") + kThink + " Lyon");
  // A transcript prompt whose answer breaks it is no plain prompt: a bad line, as without a prompt field.
  ReadStats bad;
  EXPECT_TRUE(read_lines(dir, {{{"prompt", ""}, {"chosen", "\n\nHuman: q\n\nAssistant: a"}, {"rejected", "plain"}}}, cfg,
                         bad).empty());
  EXPECT_EQ(bad.first_bad[size_t(BadLineKind::NotTranscript)],
            dir.file("pairs.jsonl") + ":1: field 'prompt' + field 'rejected' is not a \"\\n\\nHuman: ...\\n\\nAssistant: ...\" "
                                      "transcript (chat mode)");
}

TEST(PreferenceShapes, MessageListsRenderInTheChatTemplate) {
  TempDir dir;
  HhReaderConfig cfg;  // raw mode: lists are rendered in the template all the same
  cfg.prompt_field = "prompt";
  ReadStats stats;
  // A prompt list (system + user) with assistant answers; the rejected one thinks aloud.
  auto pairs = read_lines(dir,
                          {{{"prompt", {msg("system", "Be brief."), msg("user", "2+2?")}},
                            {"chosen", {msg("assistant", "4")}},
                            {"rejected", {msg("assistant", "<think>\nadd\n</think>\n\n5")}}},
                           // A string prompt with a list answer and a string answer.
                           {{"prompt", "What is up?"}, {"chosen", {msg("assistant", "Nothing")}}, {"rejected", "Sky"}}},
                          cfg, stats);
  ASSERT_EQ(pairs.size(), 2u) << stats.report();
  const std::string head = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n";
  EXPECT_EQ(pairs[0].first, head + kThink + "4");
  EXPECT_EQ(pairs[0].second, head + "<|im_start|>assistant\n<think>\nadd\n</think>\n\n5");
  EXPECT_EQ(pairs[1].first, std::string("<|im_start|>user\nWhat is up?<|im_end|>\n") + kThink + "Nothing");
  EXPECT_EQ(pairs[1].second, std::string("<|im_start|>user\nWhat is up?<|im_end|>\n") + kThink + "Sky");

  // No prompt field: each answer is the whole conversation. An earlier assistant turn loses its reasoning.
  cfg.prompt_field = "";
  pairs = read_lines(dir,
                     {{{"chosen", {msg("user", "a"), msg("assistant", "<think>r</think>\nb"), msg("user", "c"),
                                   msg("assistant", "d")}},
                       {"rejected", {msg("user", "a"), msg("assistant", "e")}}}},
                     cfg, stats);
  ASSERT_EQ(pairs.size(), 1u) << stats.report();
  EXPECT_EQ(pairs[0].first, std::string("<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n"
                                        "<|im_start|>user\nc<|im_end|>\n") + kThink + "d");
  EXPECT_EQ(pairs[0].second, std::string("<|im_start|>user\na<|im_end|>\n") + kThink + "e");
}

TEST(PreferenceShapes, BadMessagesAndPromptsNameFieldAndMessage) {
  TempDir dir;
  HhReaderConfig cfg;
  cfg.prompt_field = "prompt";
  const nlohmann::json a = {msg("assistant", "x")};
  ReadStats stats;
  const auto pairs = read_lines(
      dir,
      {{{"chosen", "a"}, {"rejected", "b"}},                                                      // 1: no prompt
       {{"prompt", 3}, {"chosen", "a"}, {"rejected", "b"}},                                       // 2: not a string
       {{"prompt", "p"}, {"chosen", {1}}, {"rejected", a}},                                       // 3: not an object
       {{"prompt", "p"}, {"chosen", a}, {"rejected", {msg("user", "u"), msg("tool", "t")}}},      // 4: role tool
       {{"prompt", "p"}, {"chosen", {{{"role", "assistant"}}}}, {"rejected", a}},                 // 5: no content
       {{"prompt", "p"}, {"chosen", {msg("user", "only a question")}}, {"rejected", a}},          // 6: no answer
       {{"prompt", "p"}, {"chosen", a}, {"rejected", nlohmann::json::array()}},                   // 7: empty list
       {{"prompt", "p"}, {"chosen", a}, {"rejected", a}}},                                        // 8: good
      cfg, stats);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(stats.bad[size_t(BadLineKind::MissingField)], 1);
  EXPECT_EQ(stats.bad[size_t(BadLineKind::NotString)], 1);
  EXPECT_EQ(stats.bad[size_t(BadLineKind::BadMessages)], 4);
  EXPECT_EQ(stats.bad[size_t(BadLineKind::Empty)], 1);
  const std::string f = dir.file("pairs.jsonl");
  EXPECT_EQ(stats.first_bad[size_t(BadLineKind::MissingField)], f + ":1: no field 'prompt'");
  EXPECT_EQ(stats.first_bad[size_t(BadLineKind::NotString)], f + ":2: field 'prompt' is neither a string nor a list of messages");
  EXPECT_EQ(stats.first_bad[size_t(BadLineKind::BadMessages)], f + ":3: field 'chosen', message 0: not a {\"role\", \"content\"} object");
  EXPECT_EQ(stats.first_bad[size_t(BadLineKind::Empty)], f + ":7: field 'rejected' is empty");
  EXPECT_NE(stats.report().find("bad_messages: 4"), std::string::npos) << stats.report();

  cfg.bad_lines = BadLinePolicy::Fail;
  std::string body;
  for (const auto& l : std::vector<nlohmann::json>{{{"prompt", "p"}, {"chosen", a}, {"rejected", {msg("user", "u"), msg("tool", "t")}}},
                                                   {{"prompt", "p"}, {"chosen", {{{"role", "assistant"}}}}, {"rejected", a}},
                                                   {{"prompt", "p"}, {"chosen", {msg("user", "q")}}, {"rejected", a}}})
    body += l.dump() + "\n";
  for (int line = 1; line <= 3; ++line) {
    test::write_text(f, body.substr(0, body.find('\n') + 1));
    body.erase(0, body.find('\n') + 1);
    ReadStats s;
    const std::string err = error_of([&] { read_all({f}, cfg, s); });
    const char* want[] = {"field 'rejected', message 1: role 'tool' is not system, user or assistant",
                          "field 'chosen', message 0: no string 'content'", "field 'chosen' has no assistant message"};
    EXPECT_EQ(err.rfind(f + ":1: " + want[line - 1], 0), 0u) << err;
  }
}

// A margin field: each good line's number (integers too), as a float; a line without it, or with a value
// that is no finite float, is a bad line naming the field.
TEST(PreferenceShapes, MarginFieldIsReadAndCheckedPerLine) {
  TempDir dir;
  HhReaderConfig cfg;
  cfg.margin_field = "margin";
  std::string body;
  for (const char* l : {R"({"chosen": "a", "rejected": "b", "margin": 0.75})",  // 1
                        R"({"chosen": "a", "rejected": "b", "margin": 2})",     // 2
                        R"({"chosen": "a", "rejected": "b"})",                  // 3: no margin
                        R"({"chosen": "a", "rejected": "b", "margin": "1.5"})", // 4: a string
                        R"({"chosen": "a", "rejected": "b", "margin": 1e39})",  // 5: past a float
                        R"({"chosen": "a", "rejected": "b", "margin": null})",  // 6
                        R"({"chosen": "a", "rejected": "b", "margin": -3.5})"}) // 7
    body += std::string(l) + "\n";
  const std::string f = dir.file("m.jsonl");
  test::write_text(f, body);
  ReadStats stats;
  std::vector<float> margins;
  read_hh_pairs({f}, cfg, stats, [&](PairText& p) { margins.push_back(p.margin); });
  EXPECT_EQ(margins, (std::vector<float>{0.75f, 2.0f, -3.5f}));
  EXPECT_EQ(stats.bad[size_t(BadLineKind::MissingField)], 1);
  EXPECT_EQ(stats.bad[size_t(BadLineKind::BadMargin)], 3);
  EXPECT_EQ(stats.first_bad[size_t(BadLineKind::MissingField)], f + ":3: no field 'margin'");
  EXPECT_EQ(stats.first_bad[size_t(BadLineKind::BadMargin)],
            f + ":4: field 'margin' is not a finite number (a float's range): \"1.5\"");
  EXPECT_NE(stats.report().find("bad_margin: 3"), std::string::npos) << stats.report();
  // Without a margin field the same lines read with margin 0, whatever they hold.
  margins.clear();
  ReadStats plain;
  read_hh_pairs({f}, HhReaderConfig{}, plain, [&](PairText& p) { margins.push_back(p.margin); });
  EXPECT_EQ(margins, std::vector<float>(7, 0.0f));
}

TEST(Dataset, EndTokenAndTooLongPolicies) {
  TempDir dir;
  const std::string path = dir.file("d.jsonl");
  std::string long_text = "\n\nHuman: ";
  for (int i = 0; i < 200; ++i) long_text += "word" + std::to_string(i) + " ";
  test::write_text(path, nlohmann::json{{"chosen", "Hello world"}, {"rejected", " Hello world"}}.dump() + "\n" +
                             nlohmann::json{{"chosen", long_text}, {"rejected", "short"}}.dump() + "\n");
  DataConfig cfg;
  cfg.files = {path};
  cfg.max_len = 64;
  const auto full = qwen().encode(long_text);
  ASSERT_GT(full.size(), 100u);

  const PairDataset keep_end = build_pair_dataset(cfg, qwen());
  ASSERT_EQ(keep_end.num_pairs(), 2);
  EXPECT_EQ(keep_end.end_id, 151645);
  EXPECT_EQ(keep_end.pad_id, 151643);
  const auto s0 = keep_end.seq(0);
  EXPECT_EQ(std::vector<int32_t>(s0.begin(), s0.end()), (std::vector<int32_t>{9707, 1879, 151645}));
  const auto t = keep_end.seq(2);
  ASSERT_EQ(t.size(), 64u);
  EXPECT_EQ(t.back(), 151645);
  EXPECT_TRUE(std::equal(t.begin(), t.end() - 1, full.end() - 63));  // the last 63 text tokens
  EXPECT_EQ(keep_end.stats.pairs_truncated, 1);

  cfg.too_long = TooLongPolicy::TruncateKeepStart;
  const PairDataset keep_start = build_pair_dataset(cfg, qwen());
  const auto u = keep_start.seq(2);
  ASSERT_EQ(u.size(), 64u);
  EXPECT_EQ(u.back(), 151645);
  EXPECT_TRUE(std::equal(u.begin(), u.end() - 1, full.begin()));

  cfg.too_long = TooLongPolicy::Drop;
  const PairDataset dropped = build_pair_dataset(cfg, qwen());
  EXPECT_EQ(dropped.num_pairs(), 1);
  EXPECT_EQ(dropped.stats.pairs_dropped_too_long, 1);
  EXPECT_NE(dropped.stats.report().find("1 pairs dropped as longer than max_len"), std::string::npos);

  cfg.end_token = "<|endoftext|>";
  const std::string msg = error_of([&] { build_pair_dataset(cfg, qwen()); });
  EXPECT_NE(msg.find("is the pad token"), std::string::npos) << msg;
  cfg.end_token = "<|no_such_token|>";
  EXPECT_THROW(build_pair_dataset(cfg, qwen()), ConfigError);
}

}  // namespace
}  // namespace zero::data
