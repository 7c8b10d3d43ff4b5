// What a terminal is shown of a program's log (common/text.h TerminalText): text as it is, every
// control character visible and none obeyed, however the stream is cut into pieces.
#include "common/text.h"

#include <string>

#include "gtest/gtest.h"

namespace weft {
namespace {

std::string Whole(std::string_view text) {
  TerminalText t;
  std::string out = t.Feed(text);
  return out + t.Finish();
}

TEST(TerminalTextTest, TextNewlinesTabsAndCrlfPassAsTheyAre) {
  const std::string text = "epoch 1: loss 0.52 — précision 91 %\n\tok\r\n漢字 🙂\n";
  EXPECT_EQ(Whole(text), text);
}

TEST(TerminalTextTest, EscapeSequencesAreShownNotObeyed) {
  // OSC 52 (write the clipboard), a title change, a cursor move, a bell, a lone CR, DEL.
  EXPECT_EQ(Whole("\x1b]52;c;cm0gLXJmIH4=\x07"), "^[]52;c;cm0gLXJmIH4=^G");
  EXPECT_EQ(Whole("\x1b]0;owned\x1b\\"), "^[]0;owned^[\\");
  EXPECT_EQ(Whole("a\x1b[2Ab"), "a^[[2Ab");
  EXPECT_EQ(Whole("100%\rfake"), "100%^Mfake");
  EXPECT_EQ(Whole("x\x7fy"), "x^?y");
  EXPECT_EQ(Whole(std::string("nul\0!", 5)), "nul^@!");
  // C1 controls (CSI as U+009B), and bytes that are not UTF-8.
  EXPECT_EQ(Whole("\xc2\x9b"
                  "2J"),
            "\\u009b2J");
  EXPECT_EQ(Whole("\x9b"
                  "2J\xff"),
            "\\x9b2J\\xff");
}

TEST(TerminalTextTest, EveryCutOfTheStreamRendersAsTheWhole) {
  const std::string text =
      "a\r\nb\rc🙂d\xc2\x9b"
      "e\x1b[1m\xe6\xbc\xa2\xf0\x9f";
  const std::string whole = Whole(text);
  EXPECT_EQ(whole, "a\r\nb^Mc🙂d\\u009be^[[1m漢\\xf0\\x9f");
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    TerminalText t;
    std::string out = t.Feed(text.substr(0, cut));
    out += t.Feed(text.substr(cut));
    out += t.Finish();
    EXPECT_EQ(out, whole) << "cut at byte " << cut;
  }
  // One byte at a time.
  TerminalText t;
  std::string out;
  for (char c : text) out += t.Feed(std::string(1, c));
  out += t.Finish();
  EXPECT_EQ(out, whole);
}

}  // namespace
}  // namespace weft
