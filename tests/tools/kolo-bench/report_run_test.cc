// kolo-bench report end to end: the real binary on small hand-written train
// and collectives files, its page checked as text, then rendered by
// headless Chromium (Debian's chromium; scripts/setup.sh installs it) and
// its screenshot decoded and checked for drawn charts.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "testing/child_process.h"

namespace {

namespace fs = std::filesystem;
using kolo::testing::Describe;
using kolo::testing::RunProgram;
using kolo::testing::RunResult;
using ::testing::HasSubstr;
using ::testing::Not;

// kolo at 1 and 2 workers (1000 and 1800 images/s: speedup 1.80,
// efficiency 90%) beside torch-ddp (800 and 1500: kolo ÷ it 1.25 and 1.20),
// with test accuracies.
constexpr const char* kTrain = R"([{
  "tool": "kolo-bench train", "study": "small-cnn",
  "config": {"model": "lenet", "dataset": "fashion-mnist", "batch_size": 64,
             "scaling": "weak", "np": [1, 2], "threads": 1},
  "environment": {"cpu_model": "Test CPU <x86>", "cores": 2,
                  "kolo_commit": "abc1234", "libtorch": "2.1.2"},
  "rows": [
    {"framework": "kolo", "np": 1, "batch_per_worker": 64,
     "images_per_second_mean": 1000, "images_per_second_ci95": 12,
     "step_ms_mean": 64, "peak_rss_mib": 210, "test_accuracy": 89.25,
     "wall_seconds": 61.5, "epochs": 2},
    {"framework": "torch-ddp", "np": 1, "batch_per_worker": 64,
     "images_per_second_mean": 800, "images_per_second_ci95": 9,
     "step_ms_mean": 80, "peak_rss_mib": 400, "test_accuracy": 88.75},
    {"framework": "kolo", "np": 2, "batch_per_worker": 64,
     "images_per_second_mean": 1800, "images_per_second_ci95": 20,
     "step_ms_mean": 71.1, "peak_rss_mib": 215,
     "communication_ms_per_step": 1.25, "test_accuracy": 89.5},
    {"framework": "torch-ddp", "np": 2, "batch_per_worker": 64,
     "images_per_second_mean": 1500, "images_per_second_ci95": 30,
     "step_ms_mean": 85.3, "peak_rss_mib": 410},
    {"framework": "libtorch", "missing": "not installed"}]}])";

// kolo on gloo and the raw MPI engine over three sizes, and memcpy.
constexpr const char* kCollectives = R"({
  "benchmark": "collectives", "backend": "gloo", "np": 2,
  "rows": [
    {"collective": "allreduce", "size": 1024, "type": "float32",
     "out_of_place": {"busbw_gbps": 0.25, "wrong": 0},
     "in_place": {"busbw_gbps": 0.2, "wrong": 0}},
    {"collective": "allreduce", "size": 65536, "type": "float32",
     "out_of_place": {"busbw_gbps": 2.25, "wrong": 0},
     "in_place": {"busbw_gbps": 2.0, "wrong": 0}},
    {"collective": "allreduce", "size": 4194304, "type": "float32",
     "out_of_place": {"busbw_gbps": 4.5, "wrong": 0},
     "in_place": {"busbw_gbps": 4.25, "wrong": 0}}],
  "peers": [{"engine": "mpi", "rows": [
    {"collective": "allreduce", "size": 1024, "type": "float32",
     "out_of_place": {"busbw_gbps": 0.5}},
    {"collective": "allreduce", "size": 65536, "type": "float32",
     "out_of_place": {"busbw_gbps": 3.0}},
    {"collective": "allreduce", "size": 4194304, "type": "float32",
     "out_of_place": {"busbw_gbps": 5.0}}]}],
  "memcpy_2thread": [{"size": 1024, "gbps": 8.0},
                     {"size": 4194304, "gbps": 12.0}]})";

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh directory for one test, removed when it ends.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = ::testing::TempDir() + "kolo_report_XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) fs::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes the two inputs into `dir` and runs kolo-bench report on them.
RunResult MakeReport(const std::string& dir, const std::string& output) {
  std::ofstream(dir + "/train.json") << kTrain;
  std::ofstream(dir + "/collectives.json") << kCollectives;
  return RunProgram({KOLO_BENCH_PATH, "report", dir + "/train.json",
                     dir + "/collectives.json", "-o", output},
                    {}, std::chrono::seconds(60));
}

TEST(ReportRun, WritesOneSelfContainedPage) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string output = dir.path() + "/report.html";
  RunResult r = MakeReport(dir.path(), output);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_THAT(r.out, HasSubstr("wrote " + output));
  EXPECT_FALSE(fs::exists(output + ".tmp"));
  const std::string html = ReadAll(output);

  // Nothing fetched from anywhere.
  EXPECT_THAT(html, Not(HasSubstr("http://")));
  EXPECT_THAT(html, Not(HasSubstr("https://")));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));

  // Throughput, efficiency, accuracy and one bandwidth chart, each a
  // section of its own beside the environment, and ZeRO, pipeline and
  // checkpoint sections that say they have no records.
  EXPECT_EQ(Count(html, "<svg"), 4u);
  EXPECT_EQ(Count(html, "<section"), 8u);
  EXPECT_THAT(html, HasSubstr("No ZeRO records in these files"));
  EXPECT_THAT(html, HasSubstr("No pipeline records in these files"));
  EXPECT_THAT(html, HasSubstr("No checkpoint records in these files"));
  EXPECT_THAT(html, HasSubstr("<h2>Training throughput</h2>"));
  EXPECT_THAT(html, HasSubstr("<h2>Scaling efficiency</h2>"));
  EXPECT_THAT(html, HasSubstr("<h2>Test accuracy</h2>"));
  EXPECT_THAT(html, HasSubstr("<h2>Collective bus bandwidth</h2>"));
  EXPECT_THAT(html, HasSubstr("<h2>Environment</h2>"));
  // Series: kolo and torch-ddp twice each (throughput, efficiency), kolo
  // gloo and raw mpi, the ideal line and the memcpy line.
  EXPECT_EQ(Count(html, "<polyline"), 8u);
  EXPECT_GT(Count(html, "<path"), 10u);
  EXPECT_THAT(html, HasSubstr("data-series=\"kolo gloo\""));
  EXPECT_THAT(html, HasSubstr("data-series=\"raw mpi\""));
  EXPECT_THAT(html, HasSubstr("memcpy, 2 threads"));
  EXPECT_THAT(html, HasSubstr("ideal (100%)"));

  auto cell = [](const std::string& text) {
    return "<td class=\"num\">" + text + "</td>";
  };
  // Training: the means, kolo's speedup and efficiency, kolo ÷ torch-ddp.
  EXPECT_THAT(html, HasSubstr(cell("1800")));
  EXPECT_THAT(html, HasSubstr(cell("1.80")));
  EXPECT_THAT(html, HasSubstr(cell("90")));
  EXPECT_THAT(html, HasSubstr(cell("1.25")));  // 1000 / 800
  EXPECT_THAT(html, HasSubstr(cell("1.20")));  // 1800 / 1500
  EXPECT_THAT(html, HasSubstr(cell("89.25")));
  EXPECT_THAT(html, HasSubstr("not installed"));
  // Bandwidth: kolo gloo ÷ raw mpi is 0.25 / 0.5, 2.25 / 3, 4.5 / 5.
  EXPECT_THAT(html, HasSubstr("<th>kolo gloo ÷ raw mpi</th>"));
  EXPECT_THAT(html, HasSubstr(cell("0.50")));
  EXPECT_THAT(html, HasSubstr(cell("0.75")));
  EXPECT_THAT(html, HasSubstr(cell("0.90")));
  EXPECT_THAT(html, HasSubstr(cell("4.50")));
  // The environment, escaped.
  EXPECT_THAT(html, HasSubstr("Test CPU &lt;x86&gt;"));
  EXPECT_THAT(html, HasSubstr("abc1234"));
}

TEST(ReportRun, ErrorsNameTheFile) {
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string missing = dir.path() + "/missing.json";
  RunResult r = RunProgram(
      {KOLO_BENCH_PATH, "report", missing, "-o", dir.path() + "/out.html"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err,
              HasSubstr("kolo-bench report: " + missing + ": no such file"));

  const std::string garbage = dir.path() + "/garbage.json";
  std::ofstream(garbage) << "<html>not json</html>";
  r = RunProgram(
      {KOLO_BENCH_PATH, "report", garbage, "-o", dir.path() + "/out.html"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr(garbage + ": not JSON"));

  const std::string other = dir.path() + "/fusion.json";
  std::ofstream(other) << R"({"benchmark": "fusion", "rows": []})";
  r = RunProgram(
      {KOLO_BENCH_PATH, "report", other, "-o", dir.path() + "/out.html"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err,
              HasSubstr(other + ": no kolo-bench train, collectives or zero"));

  // Never the page over its own input.
  std::ofstream(dir.path() + "/train.json") << kTrain;
  r = RunProgram({KOLO_BENCH_PATH, "report", dir.path() + "/train.json", "-o",
                  dir.path() + "/train.json"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_THAT(r.err, HasSubstr("is one of the result files"));
  EXPECT_EQ(ReadAll(dir.path() + "/train.json"), kTrain);
  EXPECT_FALSE(fs::exists(dir.path() + "/out.html"));
}

// ---- Rendering in a browser.

// A decoded PNG as 8-bit RGB. Only what Chromium writes is supported:
// 8-bit RGB or RGBA, not interlaced.
struct Image {
  uint32_t width = 0;
  uint32_t height = 0;
  std::vector<uint8_t> rgb;
};

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  return (uint32_t{static_cast<uint8_t>(bytes[at])} << 24) |
         (uint32_t{static_cast<uint8_t>(bytes[at + 1])} << 16) |
         (uint32_t{static_cast<uint8_t>(bytes[at + 2])} << 8) |
         uint32_t{static_cast<uint8_t>(bytes[at + 3])};
}

// PNG: a signature, then chunks (length, type, data, CRC). IHDR gives the
// size and pixel format; the IDAT chunks together are one zlib stream of
// rows, each a filter byte and the row's bytes filtered against the
// previous row (none, sub, up, average, Paeth).
std::string DecodePng(const std::string& png, Image* image) {
  static const char kSignature[] = "\x89PNG\r\n\x1a\n";
  if (png.size() < 8 || png.compare(0, 8, kSignature, 8) != 0) {
    return "not a PNG";
  }
  std::string idat;
  int channels = 0;
  for (size_t at = 8; at + 12 <= png.size();) {
    const uint32_t length = BigEndian32(png, at);
    const std::string type = png.substr(at + 4, 4);
    if (at + 12 + length > png.size()) return "truncated chunk " + type;
    const size_t data = at + 8;
    if (type == "IHDR") {
      image->width = BigEndian32(png, data);
      image->height = BigEndian32(png, data + 4);
      const int depth = static_cast<uint8_t>(png[data + 8]);
      const int color = static_cast<uint8_t>(png[data + 9]);
      const int interlace = static_cast<uint8_t>(png[data + 12]);
      if (depth != 8 || (color != 2 && color != 6) || interlace != 0) {
        return "unsupported PNG format (depth " + std::to_string(depth) +
               ", colour type " + std::to_string(color) + ")";
      }
      channels = color == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      idat.append(png, data, length);
    } else if (type == "IEND") {
      break;
    }
    at += 12 + length;
  }
  if (channels == 0) return "no IHDR chunk";
  const size_t stride = size_t{image->width} * channels;
  std::vector<uint8_t> raw((stride + 1) * image->height);
  uLongf raw_size = raw.size();
  if (uncompress(raw.data(), &raw_size,
                 reinterpret_cast<const Bytef*>(idat.data()),
                 idat.size()) != Z_OK ||
      raw_size != raw.size()) {
    return "IDAT does not inflate to " + std::to_string(raw.size()) + " bytes";
  }
  std::vector<uint8_t> previous(stride, 0);
  std::vector<uint8_t> row(stride);
  image->rgb.clear();
  image->rgb.reserve(size_t{image->width} * image->height * 3);
  for (uint32_t y = 0; y < image->height; ++y) {
    const uint8_t* in = &raw[y * (stride + 1)];
    const int filter = in[0];
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= size_t(channels) ? row[i - channels] : 0;
      const int b = previous[i];
      const int c = i >= size_t(channels) ? previous[i - channels] : 0;
      int predictor = 0;
      switch (filter) {
        case 0: predictor = 0; break;
        case 1: predictor = a; break;
        case 2: predictor = b; break;
        case 3: predictor = (a + b) / 2; break;
        case 4: {
          const int p = a + b - c;
          const int pa = std::abs(p - a);
          const int pb = std::abs(p - b);
          const int pc = std::abs(p - c);
          predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
          break;
        }
        default: return "bad filter " + std::to_string(filter);
      }
      row[i] = static_cast<uint8_t>(in[1 + i] + predictor);
    }
    for (uint32_t x = 0; x < image->width; ++x) {
      for (int k = 0; k < 3; ++k) image->rgb.push_back(row[x * channels + k]);
    }
    previous.swap(row);
  }
  return "";
}

// The pids whose command line mentions `needle` (our browser profile).
std::vector<pid_t> ProcessesMentioning(const std::string& needle) {
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    std::string cmdline =
        ReadAll("/proc/" + std::string(entry->d_name) + "/cmdline");
    if (cmdline.find(needle) != std::string::npos) pids.push_back(pid);
  }
  closedir(proc);
  return pids;
}

std::string FindChromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// Runs Chromium headless on `url` with `flags`, under timeout(1), which
// starts it in a process group of its own and, after 60 s, kills that
// group: the browser and every helper it started.
RunResult RunChromium(const std::string& chromium, const std::string& home,
                      const std::vector<std::string>& flags,
                      const std::string& url) {
  std::vector<std::string> argv = {"/usr/bin/timeout",
                                   "--kill-after=5",
                                   "60",
                                   chromium,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--hide-scrollbars",
                                   "--no-first-run",
                                   "--user-data-dir=" + home + "/profile"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back(url);
  return RunProgram(argv, {{"HOME", home}}, std::chrono::seconds(90));
}

TEST(ReportRun, ChromiumDrawsTheCharts) {
  const std::string chromium = FindChromium();
  ASSERT_FALSE(chromium.empty())
      << "chromium is not installed: scripts/setup.sh installs it (Debian "
         "package chromium); this test renders the report in it";
  ScratchDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string output = dir.path() + "/report.html";
  RunResult made = MakeReport(dir.path(), output);
  ASSERT_EQ(made.exit_code, 0) << Describe(made);
  const std::string url = "file://" + output;
  const std::string home = dir.path() + "/home";
  fs::create_directories(home);

  // The DOM after parsing and layout: the charts are elements, not text.
  RunResult dom = RunChromium(chromium, home, {"--dump-dom"}, url);
  ASSERT_EQ(dom.exit_code, 0) << Describe(dom);
  EXPECT_EQ(Count(dom.out, "<svg"), 4u) << dom.out.substr(0, 2000);
  EXPECT_EQ(Count(dom.out, "<polyline"), 8u);
  EXPECT_GT(Count(dom.out, "<circle"), 8u);
  EXPECT_THAT(dom.out, HasSubstr("<h2>Collective bus bandwidth</h2>"));

  const std::string screenshot = dir.path() + "/report.png";
  RunResult shot = RunChromium(
      chromium, home, {"--screenshot=" + screenshot, "--window-size=1200,3000"},
      url);
  ASSERT_EQ(shot.exit_code, 0) << Describe(shot);
  Image image;
  const std::string error = DecodePng(ReadAll(screenshot), &image);
  ASSERT_EQ(error, "") << screenshot;
  EXPECT_EQ(image.width, 1200u);
  EXPECT_EQ(image.height, 3000u);

  // A blank page is all white; a page of a few words has some tens of
  // colours (anti-aliased text) on 0.001% of its pixels. The report's top
  // 3000 pixels measured 1,427 colours on 8.7%, with 1,184 pixels of
  // kolo's series colour (#0072B2), which only drawn lines and markers have.
  std::set<uint32_t> colours;
  size_t non_white = 0;
  size_t kolo_blue = 0;
  const size_t pixels = size_t{image.width} * image.height;
  for (size_t i = 0; i < pixels; ++i) {
    const uint8_t r = image.rgb[3 * i];
    const uint8_t g = image.rgb[3 * i + 1];
    const uint8_t b = image.rgb[3 * i + 2];
    colours.insert((uint32_t{r} << 16) | (uint32_t{g} << 8) | b);
    if (r < 245 || g < 245 || b < 245) ++non_white;
    if (std::abs(r - 0x00) <= 8 && std::abs(g - 0x72) <= 8 &&
        std::abs(b - 0xB2) <= 8) {
      ++kolo_blue;
    }
  }
  EXPECT_GT(colours.size(), 200u);
  EXPECT_GT(static_cast<double>(non_white) / pixels, 0.03);
  EXPECT_GT(kolo_blue, 300u);

  // Nothing left running: the profile directory names every process of
  // these browsers. Helpers may take a moment to notice the browser left.
  std::vector<pid_t> left;
  for (int i = 0; i < 50; ++i) {
    left = ProcessesMentioning(home + "/profile");
    if (left.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  for (pid_t pid : left) kill(pid, SIGKILL);  // ours: started by this test
  EXPECT_TRUE(left.empty()) << left.size() << " chromium processes outlived it";
}

}  // namespace
